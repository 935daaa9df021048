package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/internal/testenv"
)

// A real forge: a sync reads a Gitea repository; a push to it makes Gitea
// deliver its own signed webhook (one of type gitea, one of type gogs),
// and the destination holds the change at once, though the sync's
// interval is an hour.
func TestGiteaPushWebhook(t *testing.T) {
	t.Parallel()
	g := testenv.StartGitea(t)
	e := newEnv(t)
	addrs, _ := e.start()
	url := g.CreateRepo(t, "web")
	w := testenv.NewWork(t, g.PushURL(url))
	w.Write(map[string]string{"deploy/web/deployment.yaml": e.expand(deployment, "web")}).Commit("web")
	w.Push("main")
	e.receiver("gitea", "gitea-s3cret")
	e.receiver("gogs", "gogs-s3cret")
	g.AddWebhook(t, "web", "gitea", "http://"+addrs.Hook+"/hook/"+e.ns+"/gitea", "gitea-s3cret")
	e.apply(strings.Replace(webSync, "repo: APP,", "repo: "+url+",", 1))
	e.ready("web", metav1.ConditionTrue, 60*time.Second)

	push := func(value string) {
		t.Helper()
		w.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: '" + value + "'}\n"}).Commit(value)
		w.Push("main")
		e.eventually(30*time.Second, func() string {
			if !strings.Contains(e.dst("show", "env/dev:apps/web/configmap-web.yaml"), "v: '"+value+"'") {
				return "the destination does not hold " + value + " (Gitea's webhook did not land)"
			}
			return ""
		})
	}
	push("1")
	g.AddWebhook(t, "web", "gogs", "http://"+addrs.Hook+"/hook/"+e.ns+"/gogs", "gogs-s3cret")
	push("2")
	// Both receivers took Gitea's deliveries, signatures checked.
	e.eventually(30*time.Second, func() string {
		logs := e.logs.tail(100000)
		for _, r := range []string{"gitea", "gogs"} {
			if !strings.Contains(logs, "msg=webhook receiver="+e.ns+"/"+r+" ") {
				return "no delivery accepted by receiver " + r
			}
		}
		if strings.Contains(logs, "webhook refused") {
			return "a Gitea delivery was refused"
		}
		return ""
	})
	// The status follows the push that landed (it is written just after).
	e.eventually(10*time.Second, func() string {
		if got := e.sync("web").Status.Source.Commit; got != w.Head() {
			return fmt.Sprintf("status.source.commit %s, want %s", got, w.Head())
		}
		return ""
	})
}
