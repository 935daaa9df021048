// Package docs holds Sluice's documentation; its test runs the commands
// the documentation shows.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unicode"

	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/devcluster"
	"sluice.dev/sluice/internal/testenv"
)

// block is a fenced block of a Markdown file marked runnable (```sh
// runnable): shell commands the reader runs from the repository's root.
type block struct {
	file string
	line int
	text string
}

// runnable reads the runnable blocks of a Markdown file.
func runnable(t *testing.T, file string) []block { return blocks(t, file, "sh runnable") }

// blocks reads the fenced blocks of a Markdown file whose info string is
// info.
func blocks(t *testing.T, file, info string) []block {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(l) == "```"+info:
			cur = &block{file: file, line: n}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: a %s block is not closed", file, cur.line, info)
	}
	return out
}

// The guides run as written: each Markdown file's runnable blocks, in
// order, in a copy of the repository's examples, with the sluice built
// from this tree on PATH; a command that fails (or a check a block makes)
// fails the test, naming the file and the block's line.
func TestTheGuidesRunAsWritten(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := markdown(t, root)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/sluice", "./cmd/sluice-render")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The guides find the tools `make tools` built, never build them.
	toolEnv := tools(t, root)
	ran := 0
	for _, file := range files {
		blocks := runnable(t, file)
		if len(blocks) == 0 {
			continue
		}
		ran += len(blocks)
		rel, _ := filepath.Rel(root, file)
		t.Run(rel, func(t *testing.T) {
			// The guides at once: each in directories, a HOME and
			// clusters of its own, and mostly waiting on what it starts.
			t.Parallel()
			// The reader's own cluster, as far as a guide can tell: a
			// kubeconfig in HOME whose server records any request. A
			// guide that reaches it fell back to the reader's context.
			var reached atomic.Int64
			own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached.Add(1)
				http.Error(w, "the reader's own cluster", http.StatusForbidden)
			}))
			defer own.Close()
			work := t.TempDir()
			// What the guides use of the repository: its examples, the
			// install they build on, and the public charts vendored for
			// the tests.
			// What git tracks only: what an earlier run left in the work
			// tree (the quickstart's .out) is not the guide's.
			for _, dir := range []string{"examples", "config", "internal/render/testdata/charts"} {
				testenv.CopyTracked(t, root, dir, work)
			}
			home := t.TempDir()
			os.MkdirAll(filepath.Join(home, ".kube"), 0o700)
			ownConfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: own, cluster: {server: %q}}]\nusers: [{name: own, user: {token: own}}]\ncontexts: [{name: own, context: {cluster: own, user: own}}]\ncurrent-context: own\n", own.URL)
			if err := os.WriteFile(filepath.Join(home, ".kube", "config"), []byte(ownConfig), 0o600); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if n := reached.Load(); n > 0 {
					t.Errorf("%s: %d requests reached the reader's own kube context (~/.kube/config): a guide must use only the cluster it starts", rel, n)
				}
			}()
			// One shell for the whole file, as a reader in a terminal
			// runs a guide: what a block exports or where it changes
			// directory holds for the next. Each block writes its line to
			// fd 9 first, so a failure names the block it is in.
			script := "set -euo pipefail\n"
			for _, b := range blocks {
				script += fmt.Sprintf("echo %d >&9\n%s", b.line, b.text)
			}
			progress, err := os.Create(filepath.Join(t.TempDir(), "progress"))
			if err != nil {
				t.Fatal(err)
			}
			defer progress.Close()
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir = work
			cmd.ExtraFiles = []*os.File{6: progress} // fd 3+6
			// Nothing but what a reader has: the sluice built from this
			// tree finds the control plane and the Flux controllers `make
			// tools` built in it from whatever directory a guide is in.
			cmd.Env = append([]string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home,
				"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "GIT_CONFIG_NOSYSTEM=1"}, toolEnv...)
			// Its own process group: whatever a guide leaves running is
			// stopped with it.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err = cmd.Run()
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if err != nil {
				data, _ := os.ReadFile(progress.Name())
				lines := strings.Fields(string(data))
				at := "?"
				if len(lines) > 0 {
					at = lines[len(lines)-1]
				}
				var text string
				for _, b := range blocks {
					if fmt.Sprint(b.line) == at {
						text = b.text
					}
				}
				t.Fatalf("%s:%s: the block fails as written: %v\n%s\n--- the guide's output:\n%s", rel, at, err, text, out.String())
			}
			// What the guide shows the reader they will see, they saw.
			printed := strings.Split(out.String(), "\n")
			for _, o := range shownOutputs(t, file) {
				for i, line := range strings.Split(strings.TrimRight(o.text, "\n"), "\n") {
					if strings.TrimSpace(line) == "" {
						continue
					}
					re := shownPattern(line)
					if !slices.ContainsFunc(printed, re.MatchString) {
						t.Errorf("%s:%d: the guide shows %q, which its run did not print (as %s)\n--- the guide's output:\n%s", rel, o.line+1+i, line, re, out.String())
					}
				}
			}
		})
	}
	if ran == 0 {
		t.Fatal("no runnable block found: the guides' commands are not run")
	}
}

// shownOutputs are the blocks of a guide that show what a runnable block
// prints: plain fenced blocks (no info string) whose fenced block before
// them is a runnable one.
func shownOutputs(t *testing.T, file string) []block {
	t.Helper()
	var out []block
	prev := ""
	info := ""
	var cur *block
	for n, l := range strings.Split(text(t, file), "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			info = strings.TrimPrefix(trimmed, "```")
			cur = &block{file: file, line: n + 1}
		case cur != nil && trimmed == "```":
			if info == "" && prev == "sh runnable" {
				out = append(out, *cur)
			}
			prev = info
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	return out
}

// shownPattern makes a line a guide shows into a pattern of what the run
// prints: commit IDs and digests, times, durations, loopback ports,
// temporary directories and the reader's name vary; "…" stands for what
// the guide leaves out.
func shownPattern(line string) *regexp.Regexp {
	variable := regexp.MustCompile(`…|/tmp/tmp\.\w+|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z|\b\d{2}:\d{2}:\d{2}\b|127\.0\.0\.1:\d+|\b[0-9a-f]{7,64}\b|\b\d+(ms|s)\b|\byou@laptop\b|\byou\b|\s+`)
	var b strings.Builder
	last := 0
	for _, m := range variable.FindAllStringIndex(line, -1) {
		b.WriteString(regexp.QuoteMeta(line[last:m[0]]))
		tok := line[m[0]:m[1]]
		switch {
		case tok == "…":
			b.WriteString(`.*`)
		case strings.TrimSpace(tok) == "":
			b.WriteString(`\s+`)
		case strings.HasPrefix(tok, "/tmp/"), strings.HasSuffix(tok, "Z"), tok == "you@laptop":
			b.WriteString(`\S+`)
		case tok == "you":
			b.WriteString(`[\w.-]+`)
		case strings.Contains(tok, ":") && strings.HasPrefix(tok, "127."):
			b.WriteString(`127\.0\.0\.1:\d+`)
		case strings.Contains(tok, ":"):
			b.WriteString(`\d{2}:\d{2}:\d{2}`)
		case strings.HasSuffix(tok, "s") && !regexp.MustCompile(`^[0-9a-f]+$`).MatchString(tok):
			b.WriteString(`\d+(\.\d+)?(ms|s|µs)`)
		default:
			b.WriteString(`[0-9a-f]+`)
		}
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(line[last:]))
	return regexp.MustCompile(`^\s*` + strings.TrimPrefix(b.String(), `\s+`) + `\s*$`)
}

// TestTheGuidesNameTheirOwnCluster: a guide that starts a cluster of its
// own points KUBECONFIG at the file that cluster writes before it starts
// it, so that every kubectl after it reaches that cluster or none, even
// when the cluster fails to start (a KUBECONFIG read from the cluster's
// output would be empty then, and kubectl would use the reader's own).
func TestTheGuidesNameTheirOwnCluster(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	starts := regexp.MustCompile(`(?m)^\s*sluice dev cluster\b.*&\s*$`)
	dir := regexp.MustCompile(`--dir (\S+)`)
	kubectl := regexp.MustCompile(`(^|[;&|(]\s*|^\s*)kubectl\s`)
	cluster := regexp.MustCompile(`(?m)^\s*sluice dev cluster\b`)
	checked := 0
	for _, file := range markdown(t, root) {
		rel, _ := filepath.Rel(root, file)
		exported := ""
		for _, b := range runnable(t, file) {
			for _, line := range strings.Split(b.text, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "export KUBECONFIG="); ok {
					exported = v
				}
				if kubectl.MatchString(line) && exported == "" && cluster.MatchString(text(t, file)) {
					t.Errorf("%s:%d: %q runs before KUBECONFIG names the guide's cluster: kubectl asks the reader's own cluster for its version even to kustomize", rel, b.line, strings.TrimSpace(line))
				}
				if !starts.MatchString(line) {
					continue
				}
				checked++
				m := dir.FindStringSubmatch(line)
				switch {
				case m == nil:
					t.Errorf("%s:%d: %q starts a cluster without --dir: its kubeconfig's path is known only from its output", rel, b.line, strings.TrimSpace(line))
				case exported != "$PWD/"+m[1]+"/kubeconfig":
					t.Errorf("%s:%d: KUBECONFIG is %q before the cluster starts, not $PWD/%s/kubeconfig, the file it writes", rel, b.line, exported, m[1])
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no guide starts a cluster: the check checks nothing")
	}
}

// text reads a file.
func text(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// tools fails the test, saying how to build them, unless the control
// plane and the Flux controllers `make tools` builds are there (a guide
// would build them, for longer than a test may take), and returns the
// environment that points a guide's sluice at them.
func tools(t *testing.T, root string) []string {
	t.Helper()
	assets, err := devcluster.Assets(context.Background(), root, false)
	if err != nil {
		t.Fatal(err)
	}
	flux, err := devcluster.FluxBinaries(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	return []string{devcluster.AssetsEnv + "=" + assets, devcluster.FluxEnv + "=" + filepath.Dir(filepath.Dir(flux["source-controller"]))}
}

// Every relative link of the documentation leads somewhere: a file of the
// repository, and a heading of it where the link names one (as GitHub
// makes anchors of headings).
func TestTheLinksResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCode := regexp.MustCompile("`[^`]*`")
	anchors := map[string]map[string]bool{}
	headings := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		a := map[string]bool{}
		data, _ := os.ReadFile(file)
		fence := false
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "```") {
				fence = !fence
			}
			if fence || !strings.HasPrefix(l, "#") {
				continue
			}
			a[slug(strings.TrimLeft(l, "# "))] = true
		}
		anchors[file] = a
		return a
	}
	checked := 0
	for _, p := range markdown(t, root) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		// Links outside code: fenced blocks and inline code left out.
		var prose strings.Builder
		fence := false
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				fence = !fence
				continue
			}
			if !fence {
				prose.WriteString(inlineCode.ReplaceAllString(l, "") + "\n")
			}
		}
		for _, m := range link.FindAllStringSubmatch(prose.String(), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := p
			if file != "" {
				dest = filepath.Join(filepath.Dir(p), filepath.FromSlash(file))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: no such file", rel, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !headings(dest)[anchor] {
				t.Errorf("%s: link %s: no such heading", rel, target)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no link checked")
	}
}

// slug is a heading's anchor as GitHub makes it: lower case, spaces to
// hyphens, punctuation other than hyphens and underscores dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every Sluice resource the documentation shows in a block marked
// ```yaml validate is valid as written: read and checked as `sluice
// hydrate -f` and the API server's validation check it.
func TestTheResourcesShownAreValid(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range markdown(t, root) {
		rel, _ := filepath.Rel(root, p)
		for _, b := range blocks(t, p, "yaml validate") {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "resource.yaml"), []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
			set, err := config.Load(dir)
			switch {
			case err != nil:
				t.Errorf("%s:%d: the resource shown is not valid: %v", rel, b.line, err)
			case len(set.ManifestSyncs)+len(set.Images)+len(set.RepoConfigs)+len(set.RunConfigs) == 0:
				t.Errorf("%s:%d: a block marked yaml validate holds no Sluice resource (a fragment: mark it yaml)", rel, b.line)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no resource checked")
	}
}

// The sluice commands of the CI configurations the documentation shows
// (blocks marked ```yaml ci: a GitHub Actions workflow, a GitLab CI job, a
// Tekton Task) name commands and flags that exist: each is parsed by the
// sluice of this tree (with --help appended: parsed, not run), and the
// command its help describes is the one the line names.
func TestTheCICommandsParse(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/sluice")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// What a CI system fills in: GitHub's ${{ ... }}, Tekton's $(...)
	// (as a number, which every flag takes).
	placeholder := regexp.MustCompile(`\$\{\{[^}]*\}\}|\$\([a-z]+\.[^)]*\)`)
	lead := regexp.MustCompile(`^(- )?(run: |script: )?`)
	n := 0
	for _, file := range markdown(t, root) {
		rel, _ := filepath.Rel(root, file)
		for _, b := range blocks(t, file, "yaml ci") {
			var doc any
			if err := yaml.Unmarshal([]byte(b.text), &doc); err != nil {
				t.Errorf("%s:%d: not YAML: %v", rel, b.line, err)
				continue
			}
			// A step or job on Sluice's own image, which has no shell,
			// runs sluice as its command: a script there cannot start.
			lines := strings.Split(b.text, "\n")
			for _, step := range onSluiceImage(doc) {
				for _, k := range []string{"script", "run", "before_script", "steps"} {
					if _, ok := step[k]; ok {
						t.Errorf("%s:%d: a %s on the image %v, which has no shell: run sluice as the command, or install the release on an image with a shell", rel, b.line, k, step["image"])
					}
				}
				if cmd, _ := step["command"].([]any); len(cmd) == 1 && cmd[0] == "sluice" {
					var args []string
					for _, a := range step["args"].([]any) {
						args = append(args, fmt.Sprint(a))
					}
					lines = append(lines, "sluice "+strings.Join(args, " "))
				}
			}
			for i, l := range lines {
				l = lead.ReplaceAllString(strings.TrimSpace(l), "")
				if !strings.HasPrefix(l, "sluice ") {
					continue
				}
				for _, end := range []string{" || ", " && ", " | ", " > ", ";"} {
					l, _, _ = strings.Cut(l, end)
				}
				l = placeholder.ReplaceAllString(l, "1")
				var words []string
				for _, w := range strings.Fields(l)[1:] {
					if strings.HasPrefix(w, "-") {
						break
					}
					words = append(words, w)
				}
				cmd := exec.Command("bash", "-c", l+" --help")
				// GitLab's predefined variables of a merge request's
				// pipeline, as it fills them in.
				cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(),
					"CI_MERGE_REQUEST_IID=7", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME=main", "CI_COMMIT_SHA=" + strings.Repeat("a", 40),
					"CI_JOB_URL=https://gitlab.example.com/acme/src/-/jobs/1", "CI_DEFAULT_BRANCH=main"}
				out, err := cmd.CombinedOutput()
				usage := "sluice " + strings.Join(words, " ")
				switch {
				case err != nil:
					t.Errorf("%s:%d: %s: %v\n%s", rel, b.line+1+i, l, err, out)
				case !strings.Contains(string(out), "Usage:\n  "+usage+" "):
					t.Errorf("%s:%d: %s: no command %q\n%s", rel, b.line+1+i, l, usage, out)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no sluice command found in a yaml ci block")
	}
}

// onSluiceImage finds the maps of a CI configuration (jobs, steps) whose
// image or container is Sluice's own.
func onSluiceImage(v any) []map[string]any {
	var out []map[string]any
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{"image", "container"} {
			if s, ok := v[k].(string); ok && strings.Contains(s, "sluice-dev/sluice") {
				out = append(out, v)
				break
			}
		}
		for _, c := range v {
			out = append(out, onSluiceImage(c)...)
		}
	case []any:
		for _, c := range v {
			out = append(out, onSluiceImage(c)...)
		}
	}
	return out
}

// markdown lists the Markdown files of the repository (not its build
// outputs, test data or examples' generated repositories).
func markdown(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
