package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// TestMain makes the test binary a worker when a Sandbox starts it, and a
// probe of its confinement when a test does.
func TestMain(m *testing.M) {
	if IsWorker(os.Args) {
		os.Exit(WorkerMain(os.Args))
	}
	if len(os.Args) > 1 && os.Args[1] == "probe" {
		os.Exit(probe(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "leftover" {
		os.Exit(leftover())
	}
	os.Exit(m.Run())
}

// probe tries what a worker must not be able to do, and prints what
// happened: a file read, a TCP connection; then its environment, a
// variable a line, and the limits it runs under.
func probe(args []string) int {
	_, err := os.ReadFile(args[0])
	fmt.Printf("read: %v\n", err)
	conn, err := net.DialTimeout("tcp", args[1], 2*time.Second)
	if err == nil {
		conn.Close()
	}
	fmt.Printf("connect: %v\n", err)
	for _, kv := range os.Environ() {
		fmt.Printf("env: %s\n", kv)
	}
	var as, cpu syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_AS, &as)
	syscall.Getrlimit(syscall.RLIMIT_CPU, &cpu)
	fmt.Printf("address space: %d\ncpu: %d\n", as.Cur, cpu.Cur)
	return 0
}

func newSandbox(t *testing.T, limits Limits, observe ...func(Usage)) *Sandbox {
	t.Helper()
	o := Options{Command: []string{os.Args[0], WorkerArg}, Limits: limits}
	if len(observe) > 0 {
		o.Observe = observe[0]
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// mapFS is an in-memory source tree.
type mapFS map[string]string

func (m mapFS) fs() source.FS {
	f := fstest.MapFS{}
	for k, v := range m {
		f[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return hashed{f}
}

type hashed struct{ fstest.MapFS }

func (h hashed) Hash(name string) (string, error) {
	data, err := h.MapFS.ReadFile(name)
	if err != nil {
		return "", err
	}
	return source.BlobHash(data), nil
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: app:1}
      - {name: sidecar, image: proxy:1}
`

var tree = mapFS{
	"base/kustomization.yaml":     "resources: [deployment.yaml]\n",
	"base/deployment.yaml":        deployment,
	"overlay/kustomization.yaml":  "namespace: dev\nnamePrefix: dev-\nresources: [../base]\npatches:\n- path: image.yaml\n",
	"overlay/image.yaml":          "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - {name: app, image: app:2}\n",
	"chart/Chart.yaml":            "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
	"chart/values.yaml":           "replicas: 2\n",
	"chart/templates/deploy.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}}\ndata: {replicas: {{ .Values.replicas | quote }}}\n",
	"plain/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n",
	// A kustomization that brings its own OpenAPI schema: one that knows
	// no Deployment, so its patches replace lists they would merge.
	"custom/kustomization.yaml": "openapi: {path: schema.json}\nresources: [../base]\npatches:\n- path: image.yaml\n",
	"custom/image.yaml":         "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - {name: app, image: app:3}\n",
	"custom/schema.json":        `{"definitions": {}}`,
}

// TestARenderInAWorkerIsTheRenderInProcess: objects, inputs and
// renderer are those of render.Render, for kustomize, helm and plain
// folders.
func TestARenderInAWorkerIsTheRenderInProcess(t *testing.T) {
	var used []Usage
	s := newSandbox(t, Limits{}, func(u Usage) { used = append(used, u) })
	for i, dir := range []string{"overlay", "chart", "plain"} {
		want, err := render.Render(context.Background(), tree.fs(), dir, render.Options{ReleaseName: "r", Origins: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Render(context.Background(), tree.fs(), dir, render.Options{ReleaseName: "r", Origins: true})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		wy, _ := want.YAML()
		gy, _ := got.YAML()
		if string(gy) != string(wy) {
			t.Errorf("%s: objects\n%s\nwant\n%s", dir, gy, wy)
		}
		if fmt.Sprint(got.Inputs) != fmt.Sprint(want.Inputs) {
			t.Errorf("%s: inputs %v, want %v", dir, got.Inputs, want.Inputs)
		}
		if got.Renderer != want.Renderer || fmt.Sprint(got.Origins) != fmt.Sprint(want.Origins) {
			t.Errorf("%s: renderer %v origins %v, want %v %v", dir, got.Renderer, got.Origins, want.Renderer, want.Origins)
		}
		// What the worker used is told when it ends: a Go process's
		// tens of MiB, some CPU, no limit reached. Plain YAML runs no
		// engine, and no worker: it is parsed here.
		workers := min(i+1, 2)
		if len(used) != workers {
			t.Fatalf("%s: %d usages observed, want %d", dir, len(used), workers)
		}
		if u := used[workers-1]; u.CPU <= 0 || u.MaxRSS < 4<<20 || u.MaxRSS > 1<<30 || u.Killed != "" {
			t.Errorf("%s: usage %+v", dir, u)
		}
	}
}

// TestNoRenderChangesAnother, as a team whose kustomization sets its own
// OpenAPI schema: another team's Deployment rendered after it, by the
// same sandbox, keeps its sidecar (a schema set in process would have
// made the patch replace the list of containers).
func TestNoRenderChangesAnother(t *testing.T) {
	s := newSandbox(t, Limits{})
	if _, err := s.Render(context.Background(), tree.fs(), "custom", render.Options{}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Render(context.Background(), tree.fs(), "overlay", render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	y, _ := res.YAML()
	if !strings.Contains(string(y), "name: sidecar") || !strings.Contains(string(y), "image: app:2") {
		t.Fatalf("the other team's Deployment:\n%s", y)
	}
}

// TestAWorkerIsConfined: a worker's process opens no file, connects to
// no TCP port and holds none of this process's environment (a
// credential in it, say).
// TestAWorkerIsConfined starts a probe in place of the worker through
// Sandbox.spawn, the path every render takes (its environment, the
// confined spawning thread, the limits), and the probe tries what a
// worker must not do: read a file this process can, connect to a TCP
// port here, see this process's environment. It also reads the limits it
// runs under. A machine without Landlock fails it: workers there would
// run unconfined (SLUICE_TEST_UNCONFINED=1 acknowledges such a machine).
func TestAWorkerIsConfined(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("SLUICE_GIT_PASSWORD", "s3cret")
	secret := t.TempDir() + "/token"
	os.WriteFile(secret, []byte("s3cret"), 0o600)
	limits := Limits{Memory: 512 << 20, CPU: 7 * time.Second}.WithDefaults()
	s, err := New(Options{Command: []string{os.Args[0], "probe", secret, ln.Addr().String()}, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if abi, why := s.Confinement(); abi == 0 {
		if os.Getenv("SLUICE_TEST_UNCONFINED") == "" {
			t.Fatalf("no Landlock here (%s): render workers would run unconfined, able to read any file and connect anywhere; run on a kernel with Landlock (5.13+, lsm=landlock), or set SLUICE_TEST_UNCONFINED=1 to acknowledge it", why)
		}
		t.Skipf("no Landlock here (%s), acknowledged by SLUICE_TEST_UNCONFINED", why)
	}
	w, err := s.spawn(limits, false)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(w.out)
	w.wait()
	w.close()
	got := string(out)
	for _, want := range []string{
		"read: open " + secret + ": permission denied",
		"connect: dial tcp " + ln.Addr().String() + ": connect: permission denied",
		fmt.Sprintf("address space: %d", addressSpace(limits.Memory)),
		"cpu: 7",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the probe says:\n%s\nwant %q", got, want)
		}
	}
	// Its environment is the runtime's settings and where start-up finds
	// its directories: nothing of this process's.
	var keys []string
	for _, l := range strings.Split(got, "\n") {
		if kv, ok := strings.CutPrefix(l, "env: "); ok {
			k, _, _ := strings.Cut(kv, "=")
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if want := []string{"GOGC", "GOMEMLIMIT", "GOTRACEBACK", "TMPDIR", "XDG_CACHE_HOME"}; !slices.Equal(keys, want) {
		t.Errorf("the worker's environment holds %v, want %v", keys, want)
	}
	// This process itself is not confined.
	if _, err := os.ReadFile(secret); err != nil {
		t.Errorf("the host lost its own access: %v", err)
	}
}

// chart is a chart of one template.
func chart(tpl string) mapFS {
	return mapFS{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n", "c/templates/t.yaml": tpl}
}

// TestARenderPastItsLimitsIsKilled, as a chart's author: a template that
// grows without bound is killed at the memory limit, one that loops
// producing nothing at the CPU limit, one slower than the timeout at
// the timeout; each says which, and what it last read; no process is
// left behind, in a worker of its own or one kept warm for its domain
// (which is not kept).
func TestARenderPastItsLimitsIsKilled(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	for _, tt := range []struct {
		name   string
		files  mapFS
		limits Limits
		render render.Limits
		want   func(error) bool
		killed string
	}{
		{"output that grows", chart("{{ range 25000 }}" + big + "{{ end }}"), Limits{Memory: 256 << 20}, render.Limits{},
			func(err error) bool {
				var ke *KilledError
				return errors.As(err, &ke) && ke.Limit == "memory" && strings.Contains(err.Error(), "--render-memory-limit")
			}, "memory"},
		{"a loop producing nothing", chart("{{ range 100000000000 }}{{ end }}"), Limits{CPU: 2 * time.Second}, render.Limits{},
			func(err error) bool {
				var ke *KilledError
				return errors.As(err, &ke) && ke.Limit == "CPU" && strings.Contains(err.Error(), "--render-cpu-limit") && strings.Contains(err.Error(), "it last read c/templates/t.yaml")
			}, "CPU"},
		{"slower than the timeout", chart("{{ range 100000000000 }}{{ end }}"), Limits{}, render.Limits{Timeout: 2 * time.Second},
			func(err error) bool {
				return errors.Is(err, render.ErrTimeout) && strings.Contains(err.Error(), "--render-timeout")
			}, "timeout"},
	} {
		for _, d := range []Domain{{}, {Namespace: "team", Source: "https://git.example/c@1"}} {
			t.Run(fmt.Sprintf("%s, warm %v", tt.name, d.warm()), func(t *testing.T) {
				var used []Usage
				s := newSandbox(t, tt.limits, func(u Usage) { used = append(used, u) })
				if d.warm() {
					// A render first, whose worker the killed one is.
					if _, err := s.RenderIn(context.Background(), d, tree.fs(), "overlay", render.Options{}); err != nil {
						t.Fatal(err)
					}
					idlePIDs(t, s, 1)
					used = nil
				}
				start := time.Now()
				_, err := s.RenderIn(context.Background(), d, tt.files.fs(), "c", render.Options{ReleaseName: "r", Limits: tt.render})
				if !tt.want(err) {
					t.Fatalf("err = %v", err)
				}
				t.Logf("%s after %s", err, time.Since(start).Round(time.Millisecond))
				// The worker is gone: its process group is empty.
				if n := workers(t); n != 0 {
					t.Errorf("%d worker processes left", n)
				}
				// The observer hears which limit ended it (for the
				// controller's sluice_render_workers_killed_total).
				if len(used) != 1 || used[0].Killed != tt.killed || used[0].CPU <= 0 {
					t.Errorf("usage observed: %+v, want one killed for %s", used, tt.killed)
				}
				if tt.killed == "timeout" && used[0].MaxRSS <= 0 {
					t.Errorf("a worker killed by its host has its peak read first: %+v", used)
				}
				if n := s.pool.idleCount(); n != 0 {
					t.Errorf("%d workers kept after a render killed", n)
				}
			})
		}
	}
}

// workers counts the processes this one started that still run.
func workers(t *testing.T) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	n := 0
	me := fmt.Sprint(os.Getpid())
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == me && fields[0] != "Z" {
			n++
		}
	}
	return n
}

// TestACancelledRenderEndsItsWorker: the caller's context ends (a
// SIGTERM, a reconcile that is dropped): the worker is killed at once.
func TestACancelledRenderEndsItsWorker(t *testing.T) {
	s := newSandbox(t, Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := s.Render(ctx, chart("{{ range 100000000000 }}{{ end }}").fs(), "c", render.Options{ReleaseName: "r"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if n := workers(t); n != 0 {
		t.Errorf("%d worker processes left", n)
	}
}

// TestTemplatesAreBoundedInOutputAndTime, as the author of a pull
// request's title: a template that prints a gigabyte, or loops for ever,
// fails within its bounds; a sound one gives its text.
func TestTemplatesAreBoundedInOutputAndTime(t *testing.T) {
	s := newSandbox(t, Limits{})
	type sync struct{ Name string }
	data := struct {
		Branch string
		Syncs  []sync
	}{"main", []sync{{"web"}, {"api"}}}
	got, err := s.Template(context.Background(), "title", `Hydrate {{.Branch}}: {{range $i, $s := .Syncs}}{{if $i}}, {{end}}{{$s.Name}}{{end}}`, data, 1024)
	if err != nil || got != "Hydrate main: web, api" {
		t.Fatalf("a sound template: %q, %v", got, err)
	}
	for _, tt := range []struct{ text, want string }{
		{`{{range 600}}{{printf "%0999999d" 1}}{{end}}`, "output over its limit"},
		{`{{range 1000000}}{{$.Branch}}{{end}}`, "output over its limit"},
		{`{{range 100000000000}}{{end}}`, "limit of 10s"},
		{`{{.Nope}}`, "Nope"},
	} {
		start := time.Now()
		_, err := s.Template(context.Background(), "body", tt.text, data, 64<<10)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.text, err, tt.want)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("%s: ended after %s", tt.text, d)
		}
	}
}
