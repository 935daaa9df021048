package controller

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/testenv"
)

// A resource naming a path on the controller's disk is refused (Stalled:
// retrying will not help), unless the controller was started to try it
// on one's own machine.
func TestLocalRepositoriesAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.apply(strings.Replace(webSync, "repo: APP, ref: main", "repo: /etc, ref: main", 1))
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	stalled := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionStalled)
	if c.Reason != v1alpha1.ReasonInvalid || stalled == nil || stalled.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "spec.source.repo") || !strings.Contains(c.Message, "remote repositories only") {
		t.Fatalf("a local source: Ready %s %q, Stalled %v", c.Reason, c.Message, stalled)
	}
}

// The quickstart, as `sluice dev cluster --serve` runs it: its files
// applied with their local paths made absolute, hydrated by a controller
// allowed to read this machine's repositories.
func TestQuickstartOnALocalController(t *testing.T) {
	t.Parallel()
	root, err := testenv.SourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	testenv.CopyTracked(t, root, "examples/quickstart", work)
	dir := filepath.Join(work, "examples")
	set, err := config.Load(filepath.Join(dir, "quickstart", "syncs"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	for _, ms := range set.ManifestSyncs {
		if ms.Labels == nil {
			ms.Labels = map[string]string{}
		}
		ms.Labels["sluice.dev/test"] = e.shard
	}
	e.start(func(o *Options) { o.AllowLocalRepos = true })
	names, err := ApplyResources(context.Background(), cp.Config, e.ns, set)
	if err != nil || len(names) != len(set.ManifestSyncs) {
		t.Fatalf("applied %v: %v", names, err)
	}
	for _, ms := range set.ManifestSyncs {
		e.ready(ms.Name, metav1.ConditionTrue, 60*time.Second)
	}
	out, err := exec.Command("git", "--git-dir", filepath.Join(dir, "quickstart", ".out", "service-deploy.git"), "ls-tree", "-r", "--name-only", "env/dev").Output()
	if err != nil || !strings.Contains(string(out), "apps/guestbook/") || !strings.Contains(string(out), "apps/shop/") {
		t.Fatalf("env/dev: %v\n%s", err, out)
	}
}
