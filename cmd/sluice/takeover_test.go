package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

func TestRepoConfigTakeoverAndBuildCLI(t *testing.T) {
	f := testenv.NewPlatform(t)
	rc := f.RepoConfig("rc.yaml", "")
	cache := "--cache-dir=" + t.TempDir()
	out, stderr, code := run(t, "apply", "-f", rc, cache)
	if code != 0 || !strings.Contains(out, "image guestbook "+f.Reg.Host+"/team/guestbook@sha256:") || !strings.Contains(out, "built") || !strings.Contains(out, "apps-dev committed") {
		t.Fatalf("apply -f: exit %d\n%s%s", code, out, stderr)
	}
	// Nothing changed: the images are only tagged, no layer uploaded.
	uploads := f.Reg.Uploads.Load()
	out, stderr, code = run(t, "build", "-f", rc, cache, "-o", "json")
	var results []struct {
		Name  string
		Built bool
	}
	if code != 0 || json.Unmarshal([]byte(out), &results) != nil || len(results) != 2 || results[0].Built || results[1].Built || f.Reg.Uploads.Load() != uploads {
		t.Fatalf("build of unchanged images: exit %d\n%s%s", code, out, stderr)
	}

	f.Code.Write(map[string]string{"bin/guestbook": "edited\n"})
	out, stderr, code = run(t, "takeover", "-f", rc, cache, "--local", f.Code.Dir, "--build", "guestbook", "--tag", "dev-alice", "--for", "1h")
	if code != 0 || !strings.Contains(out, "image guestbook") || !strings.Contains(out, "[dev-alice]") || !strings.Contains(out, "+dirty") || !strings.Contains(out, "apps-dev committed") {
		t.Fatalf("takeover: exit %d\n%s%s", code, out, stderr)
	}
	// The regular reconcile says why it leaves the folder alone.
	out, stderr, code = run(t, "apply", "-f", rc, cache)
	if code != 0 || !strings.Contains(out, "apps-dev skipped:") || !strings.Contains(out, "is taken over by") || !strings.Contains(out, "(deployment tag dev-alice)") {
		t.Fatalf("apply -f under a lock: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = run(t, "takeover", "release", "-f", rc, cache)
	if code != 0 || !strings.Contains(out, "apps-dev committed") {
		t.Fatalf("release: exit %d\n%s%s", code, out, stderr)
	}
	_, stderr, code = run(t, "takeover", "-f", rc, cache, "--for", "24h")
	if code != 2 || !strings.Contains(stderr, "at most 12h") {
		t.Errorf("--for 24h: exit %d\n%s", code, stderr)
	}
}

func TestApplyWatchFollowsNewCommits(t *testing.T) {
	f := testenv.NewPlatform(t)
	rc := f.RepoConfig("rc.yaml", "")
	var out, errb syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- Run(ctx, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"apply", "-f", rc, "--cache-dir=" + t.TempDir(), "--watch", "--interval", "200ms"})
	}()
	waitFor(t, "the first reconcile", func() bool { return strings.Count(out.String(), "apps-dev committed") == 1 })
	waitFor(t, "an idle round", func() bool { return strings.Contains(errb.String(), "nothing changed") })
	f.Code.Write(map[string]string{"deploy/overlays/dev/banner.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: banner}\ndata: {text: pushed}\n"})
	f.Code.Commit("banner")
	f.Code.Push("main")
	waitFor(t, "the new commit hydrated", func() bool { return strings.Count(out.String(), "apps-dev committed") == 2 })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	if !strings.Contains(f.Show("env/dev", "apps/configmap-banner.yaml"), "text: pushed") {
		t.Error("the pushed change is not in the deploy repository")
	}
}
