package v1alpha1

import (
	"strings"
	"testing"
)

func TestValidateGitPathRefusesWhatGitRefuses(t *testing.T) {
	tests := []struct {
		path string
		want string // "" for valid
	}{
		{"apps/web", ""},
		{"apps/.github/workflows", ""},
		{"apps/.gitkeep", ""},
		{".GIT/hooks", ".git folder"},
		{"apps/.Git", ".git folder"},
		{"apps/.git./x", ".git folder"},
		{"apps/.git /x", ".git folder"},
		{"GIT~1/hooks", ".git folder"},
		{".g\u200cit/hooks", ".git folder"},
		{"a//b", "empty path element"},
		{"a/../b", "git refuses"},
		{`a\b`, "Windows"},
		{"a/b:c", "Windows"},
		{"a/\x01", "Windows"},
	}
	for _, tt := range tests {
		err := ValidateGitPath(tt.path)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.path, err, tt.want)
		}
	}
	ms := &ManifestSync{Spec: ManifestSyncSpec{Source: Source{Repo: "."}, Destination: Destination{Branch: "main", Path: ".GIT/hooks"}}}
	ms.Name = "x"
	ms.Default()
	if errs := ms.Validate(); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "spec.destination.path") {
		t.Errorf("destination .GIT/hooks: %v", errs)
	}
}
