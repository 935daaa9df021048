package synckey

import (
	"bytes"
	"strings"
	"testing"
)

func TestAKeyReadsBackAsWritten(t *testing.T) {
	k := New()
	got, err := Parse("# a comment\n" + k.String() + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Created.Equal(k.Created) || !bytes.Equal(got.For("ns", "web", ""), k.For("ns", "web", "")) {
		t.Errorf("read back %v, wrote %v", got.Created, k.Created)
	}
}

func TestAMalformedKeyIsRefused(t *testing.T) {
	k := New().String()
	for _, text := range []string{"", "age1qqq", k + "\n" + k, strings.Replace(k, "sluicekey1.", "sluicekey1.x", 1), k[:len(k)-4]} {
		if _, err := Parse(text); err == nil {
			t.Errorf("Parse(%q) took it", text)
		}
	}
}

// Each sync derives a key of its own: another namespace, another name or
// a rotation gives another.
func TestEachSyncDerivesItsOwnKey(t *testing.T) {
	k := New()
	seen := map[string]string{}
	for _, c := range [][3]string{{"", "web", ""}, {"team-a", "web", ""}, {"team-b", "web", ""}, {"team-a", "api", ""}, {"team-a", "web", "2"}, {"team-a", "webx", ""}, {"team-aw", "eb", ""}} {
		d := string(k.For(c[0], c[1], c[2]))
		if prev, ok := seen[d]; ok {
			t.Errorf("%v derives the key of %s", c, prev)
		}
		seen[d] = strings.Join(c[:], "/")
	}
	if bytes.Equal(New().For("", "web", ""), k.For("", "web", "")) {
		t.Error("two keys derive the same")
	}
}
