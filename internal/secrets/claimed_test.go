package secrets

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

const plainSecret = "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: prod}\nstringData: {password: hunter2hunter2, user: app}\n"

// A Secret that carries SOPS metadata is kept as it is only when the
// real sops encrypted it for the destination's recipients; one whose
// values are readable is encrypted afresh, whatever its sops field says;
// anything between is refused, naming the Secret and what is wrong.
func TestASecretClaimingSOPSIsKeptOnlyIfItIs(t *testing.T) {
	id, stranger := identity(t), identity(t)
	mine := testenv.SOPSEncrypt(t, plainSecret, id.Recipient().String(), "^(data|stringData)$")
	theirs := testenv.SOPSEncrypt(t, plainSecret, stranger.Recipient().String(), "^(data|stringData)$")
	sopsBlock := mine[strings.Index(mine, "sops:"):]
	encPassword := regexp.MustCompile(`password: (ENC\[[^\]]*\])`).FindStringSubmatch(mine)[1]
	noMAC := regexp.MustCompile(`(?m)^    mac: .*$`).ReplaceAllString(mine, "    mac: \"\"")
	tests := []struct {
		name, doc string
		want      string // "as-is", "encrypted", or the error's words
	}{
		{"encrypted by sops for the destination", mine, v1alpha1.SecretAsIs},
		{"an empty sops field", strings.TrimSuffix(plainSecret, "\n") + "\nsops: {}\n", v1alpha1.SecretEncrypted},
		{"a sops field copied from an encrypted Secret", plainSecret + sopsBlock, v1alpha1.SecretEncrypted},
		{"an encrypted value beside a readable one", strings.Replace(plainSecret, "password: hunter2hunter2", "password: '"+encPassword+"'", 1) + sopsBlock, "stringData.user is not SOPS's ciphertext"},
		{"encrypted for someone else", theirs, stranger.Recipient().String()},
		{"no MAC", noMAC, "no MAC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sealed, err := Seal(context.Background(), objects(t, tt.doc), Options{Recipients: &v1alpha1.SOPS{Age: []string{id.Recipient().String()}}, Key: key})
			switch tt.want {
			case v1alpha1.SecretAsIs, v1alpha1.SecretEncrypted:
				if err != nil {
					t.Fatal(err)
				}
				if got := sealed.Records[0].Committed; got != tt.want {
					t.Fatalf("committed %s, want %s", got, tt.want)
				}
				out := sealed.Objects[0].MustString()
				if strings.Contains(out, "hunter2") {
					t.Fatalf("committed readable:\n%s", out)
				}
				// The real sops decrypts what is committed to the Secret.
				m := decrypt(t, sealed.Objects[0], id)
				if sd, _ := m["stringData"].(map[string]any); sd["password"] != "hunter2hunter2" {
					t.Errorf("sops decrypts it to %v", m)
				}
			default:
				if err == nil {
					t.Fatalf("taken: committed %s", sealed.Records[0].Committed)
				}
				if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "prod/db") || strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error: %v", err)
				}
			}
		})
	}
}

// A Secret in the items of an object kubectl unwraps as a List is
// refused: it could not be encrypted there.
func TestASecretInsideAnotherObjectsItemsIsRefused(t *testing.T) {
	doc := "apiVersion: example.com/v1\nkind: Bundle\nmetadata: {name: b}\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(plainSecret, "\n"), "\n", "\n  ") + "\n"
	_, err := Seal(context.Background(), objects(t, doc), Options{Recipients: &v1alpha1.SOPS{Age: []string{identity(t).Recipient().String()}}, Key: key})
	if err == nil || !strings.Contains(err.Error(), "Bundle /b holds a Secret in items[0]") {
		t.Fatalf("err: %v", err)
	}
}
