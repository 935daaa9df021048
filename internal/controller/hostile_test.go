package controller

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

// A hostile repository (a YAML bomb, a link out of the source) in the
// same batch as a good one: the hostile syncs fail, saying why, and the
// good one lands; the controller goes on.
func TestHostileSourcesFailAloneInTheirBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.app.Write(map[string]string{
		"deploy/bomb/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n" + indent(testenv.AliasBomb(9)),
	}).Link(map[string]string{"deploy/escape/secrets.yaml": "/etc/passwd"}).Commit("hostile")
	e.app.Push("main")
	e.start()
	e.apply(webSync)
	for _, name := range []string{"bomb", "escape"} {
		e.apply(strings.NewReplacer("name: web", "name: "+name, "deploy/web", "deploy/"+name, "apps/web", "apps/"+name).Replace(webSync))
	}
	e.ready("web", metav1.ConditionTrue, 60*time.Second)
	for name, why := range map[string]string{"bomb": "alias", "escape": "/etc/passwd"} {
		ms := e.ready(name, metav1.ConditionFalse, 60*time.Second)
		if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonFailed || !strings.Contains(c.Message, why) {
			t.Errorf("%s: %s %q", name, c.Reason, c.Message)
		}
	}
	tree := e.dst("ls-tree", "-r", "--name-only", "env/dev")
	if !strings.Contains(tree, "apps/web/") || strings.Contains(tree, "apps/bomb") || strings.Contains(tree, "apps/escape") {
		t.Errorf("env/dev:\n%s", tree)
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}
