package pin

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/kustomize/kyaml/kio"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/testenv"
)

func TestParseRef(t *testing.T) {
	tests := map[string]Ref{
		"nginx":                       {Repo: "nginx"},
		"nginx:1.25":                  {Repo: "nginx", Tag: "1.25"},
		"localhost:5000/team/web":     {Repo: "localhost:5000/team/web"},
		"localhost:5000/team/web:dev": {Repo: "localhost:5000/team/web", Tag: "dev"},
		"r.io/a/b:1@sha256:abc":       {Repo: "r.io/a/b", Tag: "1", Digest: "sha256:abc"},
		"r.io/a/b@sha256:abc":         {Repo: "r.io/a/b", Digest: "sha256:abc"},
	}
	for in, want := range tests {
		if got := ParseRef(in); got != want {
			t.Errorf("ParseRef(%q) = %+v, want %+v", in, got, want)
		}
		if got := ParseRef(in).String(); got != in {
			t.Errorf("round trip %q → %q", in, got)
		}
	}
}

func TestMatch(t *testing.T) {
	rules := []v1alpha1.ImageRule{
		{Name: "registry.example.com/team/api", Strategy: v1alpha1.StrategySemver},
		{Name: "registry.example.com/team/*"},
		{Name: "nginx", Strategy: v1alpha1.StrategySourceCommit},
	}
	tests := []struct {
		repo     string
		want     v1alpha1.ImageStrategy
		wantName string
	}{
		{"registry.example.com/team/api", v1alpha1.StrategySemver, "registry.example.com/team/api"},
		{"registry.example.com/team/web", "", "registry.example.com/team/*"},
		{"docker.io/library/nginx", v1alpha1.StrategySourceCommit, "nginx"},
		{"index.docker.io/library/nginx", v1alpha1.StrategySourceCommit, "nginx"},
		{"registry.example.com/other/x", "", ""},
	}
	for _, tt := range tests {
		got, ok := Match(rules, tt.repo)
		if got.Name != tt.wantName || ok != (tt.wantName != "") || got.Strategy != tt.want {
			t.Errorf("Match(%q) = %+v, %v", tt.repo, got, ok)
		}
	}
	if r, ok := Match([]v1alpha1.ImageRule{{Name: "*"}}, "anything/at/all"); !ok || r.Name != "*" {
		t.Error(`"*" does not match everything`)
	}
}

const workloads = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    note: "keep: this exactly"   # a comment stays
spec:
  template:
    spec:
      initContainers:
      - name: init
        image: %[1]s/team/web:latest
      containers:
      - name: web
        image: %[1]s/team/web:latest
      - name: sidecar
        image: %[1]s/other/proxy:1.0
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: job
            image: %[1]s/team/worker
---
apiVersion: v1
kind: Pod
metadata: {name: api}
spec:
  containers:
  - name: api
    image: %[1]s/team/api:1.0.0
  ephemeralContainers:
  - name: debug
    image: %[1]s/team/worker:ignored
`

func TestPinRewritesMatchingImagesAgainstARealRegistry(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t)
	web := reg.Push(t, "team/web:dev")
	commit := "0123456789abcdef0123456789abcdef01234567"
	worker := reg.Push(t, "team/worker:"+commit[:7])
	reg.Push(t, "team/api:1.2.0")
	api13 := reg.Push(t, "team/api:1.3.1")
	reg.Push(t, "team/api:2.0.0")

	objs, err := kio.FromBytes([]byte(strings.ReplaceAll(workloads, "%[1]s", reg.Host)))
	if err != nil {
		t.Fatal(err)
	}
	rules := []v1alpha1.ImageRule{
		{Name: reg.Host + "/team/web", Strategy: v1alpha1.StrategyMutableTag, Tag: "dev"},
		{Name: reg.Host + "/team/worker", Strategy: v1alpha1.StrategySourceCommit, TagLength: 7},
		{Name: reg.Host + "/team/api", Strategy: v1alpha1.StrategySemver, Constraint: ">=1.2.0 <2.0.0"},
	}
	p := &Pinner{Registry: registry.New(), Commit: commit}
	pinned, err := p.Pin(ctx, objs, rules)
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, o := range objs {
		out += o.MustString() + "---\n"
	}
	for _, want := range []string{
		"image: " + reg.Host + "/team/web:dev@" + web,
		"image: " + reg.Host + "/team/worker:0123456@" + worker,
		"image: " + reg.Host + "/team/api:1.3.1@" + api13,
		"image: " + reg.Host + "/other/proxy:1.0\n",
		`note: "keep: this exactly" # a comment stays`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "team/web:dev@") != 2 {
		t.Errorf("initContainer not pinned:\n%s", out)
	}
	if len(pinned) != 4 { // web:latest, worker, worker:ignored, api:1.0.0
		t.Errorf("pinned = %+v", pinned)
	}
}

func TestPinFailsNamingMissingTag(t *testing.T) {
	reg := testenv.NewRegistry(t)
	objs, _ := kio.FromBytes([]byte(strings.ReplaceAll(workloads, "%[1]s", reg.Host)))
	p := &Pinner{Registry: registry.New()}
	_, err := p.Pin(context.Background(), objs, []v1alpha1.ImageRule{{Name: reg.Host + "/team/web", Strategy: v1alpha1.StrategyMutableTag}})
	if err == nil || !strings.Contains(err.Error(), "image "+reg.Host+`/team/web: tag "latest" not found`) {
		t.Fatalf("err = %v", err)
	}
}

func TestRegistryRetriesTransientErrors(t *testing.T) {
	reg := testenv.NewRegistry(t)
	digest := reg.Push(t, "team/web:dev")
	var failures atomic.Int32
	reg.FailWith(func(r *http.Request) int {
		if strings.Contains(r.URL.Path, "/manifests/") && failures.Add(1) <= 2 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	c := registry.New(registry.WithBackoff(remote.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 4}))
	got, err := c.Digest(context.Background(), reg.Host+"/team/web:dev")
	if err != nil {
		t.Fatalf("Digest after two 503s: %v", err)
	}
	if got != digest || failures.Load() < 3 {
		t.Errorf("digest %s (want %s) after %d attempts", got, digest, failures.Load())
	}
}

func TestRegistryDeduplicatesLookups(t *testing.T) {
	reg := testenv.NewRegistry(t)
	reg.Push(t, "team/web:dev")
	c := registry.New()
	ctx := context.Background()
	if _, err := c.Digest(ctx, reg.Host+"/team/web:dev"); err != nil {
		t.Fatal(err)
	}
	before := reg.Requests.Load()
	for range 10 {
		c.Digest(ctx, reg.Host+"/team/web:dev")
	}
	if reg.Requests.Load() != before {
		t.Errorf("repeated look-ups reached the registry: %d requests", reg.Requests.Load()-before)
	}
}
