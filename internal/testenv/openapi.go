package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// OpenAPIServer is a vendor's API on loopback, held to the vendor's own
// published OpenAPI description, for the APIs no server of which runs
// here: every request is validated against the operation the description
// names for its method and path (path, query and header parameters, the
// body's schema), by kin-openapi, and answered with the description's
// own example of the operation's success. A request the description does
// not allow is answered 422 and recorded as a failure, and so is a request
// body with a key its schema does not name (a misspelt "lables"), as the
// vendors' servers ignore it silently: a schema that says nothing of
// additionalProperties is read as closed.
type OpenAPIServer struct {
	// URL is the API's root: the server's, with the base path.
	URL string
	// Auth, if set, checks each request's authentication (the scheme the
	// vendor documents for the operation); an error is answered 401 and
	// recorded as a failure.
	Auth func(r *http.Request, operationID string) error
	// Answer, if set, answers an operation instead of its example (ok
	// false: the example).
	Answer func(r *http.Request, operationID string) (status int, body any, ok bool)
	// Headers, if set, adds headers to an operation's answer (a rate
	// limit's, say).
	Headers func(operationID string) http.Header

	mu       sync.Mutex
	calls    []string
	failures []string
	router   routers.Router
}

// NewOpenAPIServer serves the description in file (JSON or YAML) under
// basePath ("/api/v3": where the client sends its requests).
func NewOpenAPIServer(t TB, file, basePath string) *OpenAPIServer {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(file)
	if err != nil {
		t.Fatalf("loading %s: %v", file, err)
	}
	s := &OpenAPIServer{}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + basePath
	doc.Servers = openapi3.Servers{{URL: s.URL}}
	closeRequestBodies(doc)
	if s.router, err = gorillamux.NewRouter(doc); err != nil {
		t.Fatalf("routing %s: %v", file, err)
	}
	return s
}

// closeRequestBodies makes every request body's object schemas refuse the
// keys they do not name, where the description leaves that open. An
// allOf's parts are left open: each names only some of the keys.
func closeRequestBodies(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var close func(r *openapi3.SchemaRef)
	close = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil || seen[r.Value] {
			return
		}
		s := r.Value
		seen[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil && len(s.AllOf) == 0 {
			no := false
			s.AdditionalProperties.Has = &no
		}
		for _, p := range s.Properties {
			close(p)
		}
		close(s.Items)
		for _, o := range append(append(openapi3.SchemaRefs{}, s.OneOf...), s.AnyOf...) {
			close(o)
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			for _, mt := range op.RequestBody.Value.Content {
				close(mt.Schema)
			}
		}
	}
}

func (s *OpenAPIServer) fail(w http.ResponseWriter, code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.failures = append(s.failures, msg)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func (s *OpenAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		s.fail(w, http.StatusNotFound, "%s %s: no operation of the description: %v", r.Method, r.URL.Path, err)
		return
	}
	op := route.Operation
	s.mu.Lock()
	s.calls = append(s.calls, op.OperationID)
	s.mu.Unlock()
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, "%s %s (%s) breaks the description: %v", r.Method, r.URL.Path, op.OperationID, err)
		return
	}
	if s.Auth != nil {
		if err := s.Auth(r, op.OperationID); err != nil {
			s.fail(w, http.StatusUnauthorized, "%s %s (%s): %v", r.Method, r.URL.Path, op.OperationID, err)
			return
		}
	}
	if s.Headers != nil {
		for k, v := range s.Headers(op.OperationID) {
			w.Header()[k] = v
		}
	}
	if s.Answer != nil {
		if code, body, ok := s.Answer(r, op.OperationID); ok {
			writeJSON(w, code, body)
			return
		}
	}
	code, body, err := example(op)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, "%s: %v", op.OperationID, err)
		return
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	if body == nil {
		w.WriteHeader(code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}

// example is an operation's first success response as the description
// gives an example of it.
func example(op *openapi3.Operation) (int, any, error) {
	var codes []int
	for k := range op.Responses.Map() {
		if c, err := strconv.Atoi(k); err == nil && c/100 == 2 {
			codes = append(codes, c)
		}
	}
	sort.Ints(codes)
	if len(codes) == 0 {
		return 0, nil, fmt.Errorf("no success response described")
	}
	resp := op.Responses.Status(codes[0]).Value
	mt := resp.Content.Get("application/json")
	if mt == nil {
		return codes[0], nil, nil
	}
	if mt.Example != nil {
		return codes[0], mt.Example, nil
	}
	names := make([]string, 0, len(mt.Examples))
	for n := range mt.Examples {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if ex := mt.Examples[n]; ex != nil && ex.Value != nil {
			return codes[0], ex.Value.Value, nil
		}
	}
	return codes[0], nil, fmt.Errorf("the description gives no example of its %d answer", codes[0])
}

// Calls are the operations called so far, by ID, in order.
func (s *OpenAPIServer) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// Failures are the requests that broke the description, or failed the
// authentication check, each saying why.
func (s *OpenAPIServer) Failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.failures...)
}

// Check fails the test if any request failed, saying each.
func (s *OpenAPIServer) Check(t TB) {
	t.Helper()
	if f := s.Failures(); len(f) > 0 {
		t.Fatalf("%d requests broke the description:\n%s", len(f), strings.Join(f, "\n"))
	}
}
