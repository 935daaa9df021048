package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/secrets"
	"sluice.dev/sluice/internal/testenv"
)

// Every spelling of a Secret's apiVersion and kind that kubectl applies
// as a Secret is one to Sluice (secrets.Is), and no other: the spellings
// the real kubectl and API server take decide, not Sluice's own list.
func TestEverySpellingTheAPIServerTakesForASecretIsOne(t *testing.T) {
	ns := testenv.Namespace("spell")
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	spellings := []struct{ apiVersion, kind string }{
		{"v1", "Secret"}, {"/v1", "Secret"}, {"v1", "secret"}, {"v1", "SECRET"}, {"v1", "Secrets"},
		{"core/v1", "Secret"}, {"V1", "Secret"}, {"v1 ", "Secret"}, {"apps/v1", "Secret"}, {"v1", "Sеcret"}, // Cyrillic е
	}
	taken := 0
	for i, s := range spellings {
		name := fmt.Sprintf("s%d", i)
		doc := fmt.Sprintf("apiVersion: %q\nkind: %q\nmetadata: {name: %s, namespace: %s}\nstringData: {a: b}\n", s.apiVersion, s.kind, name, ns)
		cmd := exec.Command("kubectl", "--kubeconfig", cp.Kubeconfig, "apply", "--server-side", "-f", "-")
		cmd.Stdin = strings.NewReader(doc)
		out, err := cmd.CombinedOutput()
		var sec corev1.Secret
		isSecret := err == nil && c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &sec) == nil
		if isSecret {
			taken++
		}
		if got := secrets.Is(s.apiVersion, s.kind); got != isSecret {
			t.Errorf("apiVersion %q kind %q: kubectl applies it as a Secret: %v (%s), secrets.Is says %v", s.apiVersion, s.kind, isSecret, strings.TrimSpace(string(out)), got)
		}
	}
	if taken < 2 {
		t.Errorf("kubectl applied %d of the spellings as Secrets: the check checks nothing", taken)
	}
}
