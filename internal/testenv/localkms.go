package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"

	"sluice.dev/sluice/internal/devcluster"
)

// LocalKMS is Local KMS (github.com/nsmithuk/local-kms), a server of AWS
// KMS's API that `make tools` builds (hack/local-kms/build.sh), running
// for one test.
type LocalKMS struct {
	// Endpoint is its URL (AWS_ENDPOINT_URL_KMS), Region the region of
	// its keys' ARNs.
	Endpoint, Region string
	// AccessKeyID and SecretAccessKey are the only credentials it takes:
	// Local KMS itself takes any, so every request goes through a proxy
	// on loopback that checks its Signature Version 4 signature against
	// them, as AWS does, and refuses it as KMS does otherwise.
	AccessKeyID, SecretAccessKey string
	// Refused counts the requests the proxy refused.
	Refused atomic.Int32
}

// StartLocalKMS starts Local KMS on a free loopback port, stopped when
// the test ends.
func StartLocalKMS(t TB) *LocalKMS {
	t.Helper()
	bin := versionedTool(t, "local-kms")
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	k := &LocalKMS{Endpoint: "http://" + addr, Region: "eu-west-2", AccessKeyID: "team", SecretAccessKey: "team-secret"}
	cmd := exec.Command(bin)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Env = append(os.Environ(), "PORT="+port, "KMS_REGION="+k.Region, "KMS_ACCOUNT_ID=111122223333", "KMS_DATA_PATH="+t.TempDir())
	devcluster.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("local-kms: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if resp, err := http.Get(k.Endpoint); err == nil {
			resp.Body.Close()
			k.requireSignatures(t)
			return k
		}
		if time.Now().After(deadline) {
			t.Fatalf("local-kms did not answer on %s:\n%s", addr, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Env is what the AWS SDKs (the sops CLI's, Sluice's) need in their
// environment to reach it, with credentials it accepts.
func (k *LocalKMS) Env() []string {
	return []string{"AWS_ENDPOINT_URL_KMS=" + k.Endpoint, "AWS_REGION=" + k.Region, "AWS_ACCESS_KEY_ID=" + k.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + k.SecretAccessKey}
}

// CreateKey creates a symmetric key and returns its ARN.
func (k *LocalKMS) CreateKey(t TB) string {
	t.Helper()
	c := awskms.New(awskms.Options{
		Region: k.Region, BaseEndpoint: aws.String(k.Endpoint),
		Credentials: credentials.NewStaticCredentialsProvider(k.AccessKeyID, k.SecretAccessKey, ""),
	})
	out, err := c.CreateKey(context.Background(), &awskms.CreateKeyInput{Description: aws.String("sluice test")})
	if err != nil {
		t.Fatalf("local-kms CreateKey: %v", err)
	}
	if out.KeyMetadata == nil || out.KeyMetadata.Arn == nil {
		t.Fatalf("local-kms CreateKey: no ARN")
	}
	return *out.KeyMetadata.Arn
}

// requireSignatures puts the signature-checking proxy in front of the
// server: Endpoint becomes the proxy's.
func (k *LocalKMS) requireSignatures(t TB) {
	backend, err := url.Parse(k.Endpoint)
	if err != nil {
		t.Fatalf("%v", err)
	}
	proxy := httputil.NewSingleHostReverseProxy(backend)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if why := k.checkSignature(r, body); why != "" {
			k.Refused.Add(1)
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"__type":"UnrecognizedClientException","message":%q}`, why)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	k.Endpoint = srv.URL
}

// checkSignature checks a request's SigV4 Authorization as AWS does: the
// access key it names is k's, and the signature is what k's secret key
// makes of the headers it signed and the body; "" when it holds.
func (k *LocalKMS) checkSignature(r *http.Request, body []byte) string {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return "The request is not signed with Signature Version 4."
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		if kv := strings.SplitN(strings.TrimSpace(f), "=", 2); len(kv) == 2 {
			fields[kv[0]] = kv[1]
		}
	}
	scope := strings.Split(fields["Credential"], "/") // AKID/date/region/service/aws4_request
	if len(scope) != 5 || scope[0] != k.AccessKeyID {
		return "The security token included in the request is invalid."
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "The request has no X-Amz-Date."
	}
	again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h != "host" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), scope[3], scope[2], when); err != nil {
		return err.Error()
	}
	_, want, _ := strings.Cut(again.Header.Get("Authorization"), "Signature=")
	if want == "" || want != fields["Signature"] {
		return "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
	}
	return ""
}
