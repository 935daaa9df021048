package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/internal/cluster"
)

// childEnv, set, makes the test binary a controller process of its own
// (see TestKilledMidPush): its value is the childOptions as JSON.
const childEnv = "SLUICE_TEST_CONTROLLER"

type childOptions struct {
	Kubeconfig, CacheDir, Selector string
}

// child runs a controller until it is killed.
func child() int {
	var o childOptions
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &o); err != nil {
		return 2
	}
	cfg, err := cluster.RESTConfig(cluster.ConnectOptions{Kubeconfig: o.Kubeconfig})
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = Run(ctx, Options{Config: cfg, CacheDir: o.CacheDir, WatchLabelSelector: o.Selector, MetricsAddr: "0", ProbeAddr: "0", HookAddr: "0", AllowRemoteHosts: []string{"127.0.0.1"},
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		return 1
	}
	return 0
}

// startChild starts a controller process.
func (e *env) startChild(cacheDir string) *exec.Cmd {
	e.t.Helper()
	opts, _ := json.Marshal(childOptions{Kubeconfig: cp.Kubeconfig, CacheDir: cacheDir, Selector: "sluice.dev/test=" + e.shard})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(opts))
	cmd.Stderr = e.logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// The controller killed with SIGKILL in the middle of a push, then
// restarted: the destination holds exactly one commit for the change,
// whether the push landed after the controller died (it never learned
// so) or never landed at all.
func TestKilledMidPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cacheDir := t.TempDir()
	ctrl := e.startChild(cacheDir)
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 60*time.Second)

	for round, lands := range []bool{true, false} {
		before := e.tip("env/dev")
		pushing := make(chan struct{})
		proceed := make(chan struct{})
		hook := func(r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/git-receive-pack") || !fromController(r) {
				return
			}
			// The whole push is in hand: hold it until the controller is
			// dead, then let it land, or fail it.
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			close(pushing)
			<-proceed
		}
		e.hook.Store(&hook)
		if !lands {
			e.git.FailWith(func(r *http.Request) int {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") && fromController(r) {
					return http.StatusInternalServerError
				}
				return 0
			})
		}
		e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {round: '" + string(rune('0'+round)) + "'}\n"}).Commit("change")
		e.app.Push("main")
		e.requestReconcile(e.sync("web"), "round-"+string(rune('0'+round)))
		select {
		case <-pushing:
		case <-time.After(60 * time.Second):
			t.Fatal("the controller never pushed")
		}
		if err := ctrl.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		ctrl.Wait()
		close(proceed)
		e.hook.Store(nil)
		// The held push lands (or fails): every request answered.
		e.eventually(30*time.Second, func() string {
			if served, got := e.git.Served.Load(), e.git.Requests.Load(); served != got {
				return fmt.Sprintf("%d of %d requests answered", served, got)
			}
			return ""
		})
		e.git.FailWith(nil)
		if landed := e.tip("env/dev") != before; landed != lands {
			t.Fatalf("round %d: the push landed: %v, want %v", round, landed, lands)
		}

		ctrl = e.startChild(cacheDir)
		e.eventually(60*time.Second, func() string {
			ms := e.sync("web")
			if ms.Status.Source == nil || ms.Status.Source.Commit != e.app.Head() || ms.Status.LastHandledReconcileAt != ms.Annotations["reconcile.sluice.dev/requestedAt"] {
				return "the restarted controller has not reconciled the change"
			}
			return ""
		})
		e.ready("web", metav1.ConditionTrue, 30*time.Second)
		if n := strings.Count(e.dst("log", "--format=%H", before+"..env/dev"), "\n") + 1; n != 1 || e.tip("env/dev") == before {
			t.Fatalf("round %d (push landed: %v): %d commits for one change:\n%s", round, lands, n, e.dst("log", "--oneline", before+"..env/dev"))
		}
		if !strings.Contains(e.dst("show", "env/dev:apps/web/configmap-web.yaml"), "round: '"+string(rune('0'+round))+"'") {
			t.Fatalf("round %d: the destination does not hold the change:\n%s", round, e.dst("show", "env/dev:apps/web/configmap-web.yaml"))
		}
	}
}
