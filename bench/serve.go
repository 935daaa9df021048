package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller"
	"sluice.dev/sluice/internal/devcluster"
	"sluice.dev/sluice/internal/testenv"
)

func mainServe() {
	syncs := flag.Int("syncs", 1000, "ManifestSyncs")
	repos := flag.Int("repos", 50, "source repositories")
	tags := flag.Int("tags", 200, "image tags")
	branches := flag.Int("branches", 10, "destination branches")
	interval := flag.Duration("interval", time.Minute, "the syncs' interval (one idle interval is measured)")
	pushes := flag.Int("pushes", 20, "webhook pushes timed")
	followers := flag.Int("followers", 100, "syncs following the tag that moves")
	isolation := flag.String("isolation", "process", "--render-isolation of the controller and the command line")
	kustomize := flag.Bool("kustomize", false, "each app a kustomization (rendered in a worker), not a folder of plain YAML (parsed in process)")
	history := flag.Int("history", 0, "commits of history under each source repository's apps (a monorepo's: -repos 1 -syncs 500 -history 15000 -touch 3)")
	touch := flag.Int("touch", 1, "apps of one source repository each timed push changes")
	outage := flag.Duration("outage", 0, "after the idle interval, the git server answers 503 for this long: requests counted, then the time until every sync is Ready again, nobody acting")
	gitFirst := flag.Bool("git-first", false, "with -oci: the git estate first (its clones cold), then the OCI one")
	oci := flag.Bool("oci", false, "the estate into OCI destinations (signed with a cosign key), side by side with the same estate into git, in one run: time to all Ready, requests, an idle interval's registry requests, and the signing cost per artifact")
	registryRPS := flag.Float64("registry-rps", 20, "the controller's --registry-rps (its default): look-ups of every tag once an interval need tags/interval requests a second")
	flag.Parse()
	tb := newTB()
	defer tb.cleanup()
	s := &serveBench{tb: tb, syncs: *syncs, repos: *repos, tags: *tags, branches: *branches, interval: *interval, pushes: *pushes, followers: *followers, isolation: *isolation, kustomize: *kustomize, history: *history, touch: *touch, registryRPS: *registryRPS, outage: *outage}
	s.gitFirst = *gitFirst
	run := s.run
	if *oci {
		run = s.runOCI
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

type serveBench struct {
	tb *benchTB
	// everReady holds the syncs seen Ready at least once, and eachOnce
	// when the last of them was (as bench flux measures Flux's).
	everReady                                       map[string]bool
	eachOnce                                        time.Time
	syncs, repos, tags, branches, pushes, followers int
	interval                                        time.Duration
	isolation                                       string
	kustomize                                       bool
	history, touch                                  int
	registryRPS                                     float64
	outage                                          time.Duration
	gitFirst                                        bool

	work    string
	bin     string
	git     *testenv.GitServer
	reg     *testenv.Registry
	srcURLs []string
	works   []*testenv.Work
	dstDir  string
	c       client.Client
	// cached reads the syncs from a watch, as a controller does: a
	// bench that listed 10,000 syncs every poll would be the API
	// server's largest client.
	cached  client.Reader
	ctrl    *exec.Cmd
	pprof   string
	hook    string
	metrics string
}

const serveNS = "bench"

// The synthetic estate: repos source repositories of syncs/repos apps
// each (a Deployment and a ConfigMap); tags image tags over 20 image
// repositories, the first followed by followers syncs, the others by the
// rest in turn; every sync writes its own folder of one of branches
// branches of one destination repository.
func (s *serveBench) appsPerRepo() int { return s.syncs / s.repos }

func (s *serveBench) syncName(r, a int) string { return fmt.Sprintf("r%02d-a%02d", r, a) }

func (s *serveBench) tagOf(i int) string {
	t := 0
	if i >= s.followers {
		t = 1 + (i-s.followers)%(s.tags-1)
	}
	return fmt.Sprintf("team/img%02d:t%03d", t%20, t)
}

func (s *serveBench) branchOf(i int) string { return fmt.Sprintf("env-%d", i%s.branches) }

func (s *serveBench) setUp() error {
	s.work = s.tb.TempDir()
	var err error
	if s.bin, _, err = tools(s.work); err != nil {
		return err
	}
	s.reg = testenv.NewRegistry(s.tb)
	for t := 0; t < s.tags; t++ {
		s.reg.Push(s.tb, fmt.Sprintf("team/img%02d:t%03d", t%20, t))
	}
	s.git = testenv.NewGitServer(s.tb)
	n := s.appsPerRepo()
	for r := 0; r < s.repos; r++ {
		url := s.git.CreateRepo(s.tb, fmt.Sprintf("src%02d", r))
		w := testenv.NewWork(s.tb, url)
		if s.history > 0 {
			if err := addHistory(w.Dir, s.history); err != nil {
				return err
			}
		}
		files := map[string]string{}
		for a := 0; a < n; a++ {
			i := r*n + a
			files[fmt.Sprintf("app%02d/deployment.yaml", a)] = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: app%02d}
spec:
  selector: {matchLabels: {app: app%02d}}
  template:
    metadata: {labels: {app: app%02d}}
    spec:
      containers: [{name: app, image: %s/%s}]
`, a, a, a, s.reg.Host, s.tagOf(i))
			files[fmt.Sprintf("app%02d/configmap.yaml", a)] = configMap(a, 0)
			if s.kustomize {
				files[fmt.Sprintf("app%02d/kustomization.yaml", a)] = "resources: [deployment.yaml, configmap.yaml]\n"
			}
		}
		w.Write(files).Commit("apps")
		w.Push("main")
		s.srcURLs = append(s.srcURLs, url)
		s.works = append(s.works, w)
	}
	for _, name := range []string{"deploy", "deploy-cli"} {
		url := s.git.CreateRepo(s.tb, name)
		w := testenv.NewWork(s.tb, url)
		w.Write(map[string]string{"README.md": "# deploy\n"}).Commit("init")
		w.Push("main")
	}
	s.dstDir = filepath.Join(s.git.Root, "deploy.git")
	return nil
}

// addHistory commits n commits of history on main in the work tree dir
// (git fast-import: seconds for thousands), each changing one file of
// its own folder, and checks them out.
func addHistory(dir string, n int) error {
	if n == 0 {
		return nil
	}
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		data := fmt.Sprintf("change %d\n", i)
		fmt.Fprintf(&b, "commit refs/heads/main\nmark :%d\ncommitter Bench <bench@example.com> %d +0000\ndata %d\nchange %d\n", i, 1700000000+i, len(fmt.Sprintf("change %d", i)), i)
		if i > 1 {
			fmt.Fprintf(&b, "from :%d\n", i-1)
		}
		fmt.Fprintf(&b, "M 644 inline history/log-%d.txt\ndata %d\n%s\n", i%100, len(data), data)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Stdin = dir, &b
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git fast-import: %v\n%s", err, out)
	}
	cmd = exec.Command("git", "checkout", "-q", "-f", "main")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git checkout: %v\n%s", err, out)
	}
	return nil
}

func configMap(a, v int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app%02d}\ndata: {v: '%d'}\n", a, v)
}

// manifestSync is sync (r, a) writing to the destination repository dst.
func (s *serveBench) manifestSync(r, a int, dst string) *v1alpha1.ManifestSync {
	i := r*s.appsPerRepo() + a
	y := fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: %s}
spec:
  source: {repo: %s, ref: main, path: app%02d}
  images: [{name: %s/team/*}]
  destination: {repo: %s, branch: %s, path: apps/%s}
  interval: %s
`, s.syncName(r, a), s.srcURLs[r], a, s.reg.Host, s.git.URL(dst), s.branchOf(i), s.syncName(r, a), s.interval)
	ms := &v1alpha1.ManifestSync{}
	if err := yaml.UnmarshalStrict([]byte(y), ms); err != nil {
		panic(err)
	}
	return ms
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// procStat is a process's CPU time so far, with that of the children it
// has waited for (its render workers), and its own peak resident set.
func procStat(pid int) (time.Duration, int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	cut, _ := strconv.ParseInt(f[13], 10, 64)
	cst, _ := strconv.ParseInt(f[14], 10, 64)
	cpu := time.Duration(ut+st+cut+cst) * time.Second / 100 // clock ticks of 1/100 s
	cpu += liveChildrenCPU(pid)
	var hwm int64
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(st))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				hwm, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
	}
	return cpu, hwm
}

// metric sums a counter of the controller's /metrics (all its labels).
func (s *serveBench) metric(name string) float64 { return metricAt(s.metrics, name) }

// metricAt sums a counter of the /metrics a controller serves at addr.
func metricAt(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// ready counts the syncs Ready for their generation, and those whose
// first image is pinned to digest (when digest is set).
func (s *serveBench) ready(ctx context.Context, digest string) (ready, pinned int, err error) {
	return s.readyIn(ctx, serveNS, digest)
}

// readyIn is ready of the syncs of namespace ns.
func (s *serveBench) readyIn(ctx context.Context, ns, digest string) (ready, pinned int, err error) {
	var list v1alpha1.ManifestSyncList
	if err := s.cached.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	for _, ms := range list.Items {
		c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
		if c != nil && c.Status == metav1.ConditionTrue && ms.Status.ObservedGeneration == ms.Generation {
			ready++
			if s.everReady != nil {
				s.everReady[ms.Namespace+"/"+ms.Name] = true
			}
		}
		if digest != "" && len(ms.Status.Images) > 0 && ms.Status.Images[0].Digest == digest {
			pinned++
		}
	}
	return ready, pinned, nil
}

func (s *serveBench) run() error {
	ctx := context.Background()
	if err := s.setUp(); err != nil {
		return err
	}
	n := s.appsPerRepo()

	// The baseline: the same syncs through the command line, one cold
	// `sluice hydrate` run (another destination repository).
	cliDir := filepath.Join(s.work, "syncs-cli")
	os.MkdirAll(cliDir, 0o755)
	for r := 0; r < s.repos; r++ {
		var b bytes.Buffer
		for a := 0; a < n; a++ {
			data, _ := yaml.Marshal(s.manifestSync(r, a, "deploy-cli"))
			b.WriteString("---\n")
			b.Write(data)
		}
		os.WriteFile(filepath.Join(cliDir, fmt.Sprintf("r%02d.yaml", r)), b.Bytes(), 0o644)
	}
	cli, out, err := timed("sluice hydrate (the command line), cold", s.bin, "hydrate", "-f", cliDir, "--cache-dir", filepath.Join(s.work, "cli-cache"), "-o", "json", "--render-isolation", s.isolation)
	if err != nil {
		return fmt.Errorf("sluice hydrate: %w\n%s", err, tail(out))
	}
	gitCLI := s.git.Requests.Load()

	const token = "bench-token"
	api, logf, stop, err := s.startController(ctx, token, serveNS)
	defer stop()
	if err != nil {
		return err
	}
	pid := s.ctrl.Process.Pid
	cpu0, _ := procStat(pid)
	apiCPU0, _ := procStat(api.pid)
	apiReq0 := api.requests(ctx)
	// BENCH_PROFILE=prefix: the controller's CPU profile over the first
	// minute of (a) and over (b), and its heap once all are Ready.
	profile := os.Getenv("BENCH_PROFILE")
	if profile != "" {
		go s.saveProfile(profile+".cpu", "profile?seconds=55")
	}

	// (a) every sync applied at once, until all are Ready.
	gitA, regA := s.git.Requests.Load(), s.reg.Requests.Load()
	start := time.Now()
	applied, err := s.createAll(ctx, func(r, a int) *v1alpha1.ManifestSync {
		ms := s.manifestSync(r, a, "deploy")
		ms.Namespace = serveNS
		return ms
	})
	if err != nil {
		return err
	}
	total := s.repos * n
	s.everReady = map[string]bool{}
	if err := s.allReady(ctx, start, total); err != nil {
		return fmt.Errorf("(a): %w (see %s)", err, logf.Name())
	}
	allReady := time.Since(start)
	eachOnce := s.eachOnce.Sub(start)
	s.everReady = nil
	cpuA, _ := procStat(pid)
	apiCPUA, _ := procStat(api.pid)
	apiReqA := api.requests(ctx)
	if profile != "" {
		s.saveProfile(profile+".heap", "heap")
	}
	gitAn, regAn := s.git.Requests.Load()-gitA, s.reg.Requests.Load()-regA
	commitsA := s.metric("sluice_commits_total")
	warmA, newA := s.metric(`sluice_render_worker_renders_total{warm="true"}`), s.metric(`sluice_render_worker_renders_total{warm="false"}`)

	// (b) one idle interval, nothing changed.
	time.Sleep(5 * time.Second) // what (a) left in flight settles
	gitB, regB := s.git.Requests.Load(), s.reg.Requests.Load()
	cpuB0, _ := procStat(pid)
	apiCPUB0, _ := procStat(api.pid)
	apiReqB0 := api.requests(ctx)
	rendersB0, lsB0, fetchB0 := s.metric("sluice_renders_total"), s.metric(`sluice_git_requests_total{op="ls-remote"}`), s.metric(`sluice_git_requests_total{op="fetch"}`)
	if profile != "" {
		go s.saveProfile(profile+".idle.cpu", fmt.Sprintf("profile?seconds=%d", int(s.interval.Seconds())-2))
	}
	time.Sleep(s.interval)
	cpuB1, _ := procStat(pid)
	apiCPUB1, _ := procStat(api.pid)
	apiReqB1 := api.requests(ctx)
	gitBn, regBn := s.git.Requests.Load()-gitB, s.reg.Requests.Load()-regB
	rendersB := s.metric("sluice_renders_total") - rendersB0
	lsB, fetchB := s.metric(`sluice_git_requests_total{op="ls-remote"}`)-lsB0, s.metric(`sluice_git_requests_total{op="fetch"}`)-fetchB0
	cpuIdle := cpuB1 - cpuB0
	idleReady, _, _ := s.ready(ctx, "")

	// (b′) a git outage: what it costs the server, and the way back.
	var outageReqs int64
	var outageReady int
	var backAfter time.Duration
	if s.outage > 0 {
		git0 := s.git.Requests.Load()
		s.git.FailWith(func(*http.Request) int { return http.StatusServiceUnavailable })
		time.Sleep(s.outage)
		outageReqs = s.git.Requests.Load() - git0
		outageReady, _, _ = s.ready(ctx, "")
		s.git.FailWith(nil)
		back := time.Now()
		if err := s.allReady(ctx, back, total); err != nil {
			return fmt.Errorf("(b′), once the git server is back: %w", err)
		}
		backAfter = time.Since(back)
	}

	// (c) a push to one source repository changing s.touch of its apps,
	// and its webhook: until the destination holds every change; what
	// each push rendered and fetched.
	var lat []time.Duration
	var pushRenders, pushFetches []float64
	for p := 0; p < s.pushes; p++ {
		r := p % s.repos
		files := map[string]string{}
		var apps []int
		for k := 0; k < s.touch; k++ {
			a := (p*7 + k*(n/max(s.touch, 1)+1)) % n
			apps = append(apps, a)
			files[fmt.Sprintf("app%02d/configmap.yaml", a)] = configMap(a, p+1)
		}
		s.works[r].Write(files).Commit(fmt.Sprintf("push %d", p))
		s.works[r].Push("main")
		renders0, fetch0 := s.metric("sluice_renders_total"), s.metric(`sluice_git_requests_total{op="fetch"}`)
		body := fmt.Sprintf(`{"ref":"refs/heads/main","repository":{"clone_url":%q}}`, s.srcURLs[r])
		t0 := time.Now()
		if err := post("http://"+s.hook+"/hook/"+serveNS+"/hooks", body, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hmacHex(token, body)}); err != nil {
			return fmt.Errorf("(c) push %d: %w", p, err)
		}
		// kustomize writes the string in double quotes, a plain folder
		// as it was written.
		want := regexp.MustCompile(fmt.Sprintf(`v: ['"]%d['"]`, p+1))
		for _, a := range apps {
			i := r*n + a
			path := fmt.Sprintf("%s:apps/%s/configmap-app%02d.yaml", s.branchOf(i), s.syncName(r, a), a)
			for {
				out, _ := exec.Command("git", "--git-dir", s.dstDir, "show", path).Output()
				if want.Match(out) {
					break
				}
				if time.Since(t0) > time.Minute {
					return fmt.Errorf("(c) push %d: %s never held %s (see %s)", p, path, want, logf.Name())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		lat = append(lat, time.Since(t0))
		// What the push made the controller do, once its syncs settled.
		time.Sleep(time.Second)
		pushRenders = append(pushRenders, s.metric("sluice_renders_total")-renders0)
		pushFetches = append(pushFetches, s.metric(`sluice_git_requests_total{op="fetch"}`)-fetch0)
	}

	// (d) the tag the first syncs follow moves; the registry notifies.
	img, _ := random.Image(256, 1)
	moved := s.reg.PushImage(s.tb, strings.TrimPrefix(s.tagOf(0), ""), img)
	repoTag := strings.SplitN(s.tagOf(0), ":", 2)
	note := fmt.Sprintf(`{"events":[{"action":"push","target":{"repository":%q,"tag":%q,"digest":%q},"request":{"host":%q}}]}`, repoTag[0], repoTag[1], moved, s.reg.Host)
	t0 := time.Now()
	if err := post("http://"+s.hook+"/hook/"+serveNS+"/hooks", note, map[string]string{"Authorization": "Bearer " + token}); err != nil {
		return fmt.Errorf("(d): %w", err)
	}
	for {
		_, pinned, err := s.ready(ctx, moved)
		if err != nil {
			return err
		}
		if pinned == s.followers {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			return fmt.Errorf("(d): %d of %d re-pinned after 2 minutes", pinned, s.followers)
		}
		time.Sleep(50 * time.Millisecond)
	}
	repin := time.Since(t0)
	cpuEnd, hwm := procStat(pid)
	apps := "a folder of plain YAML"
	if s.kustomize {
		apps = "a kustomization"
	}

	if s.history > 0 {
		fmt.Printf("Each source repository has %d commits of history under its apps.\n", s.history)
	}
	fmt.Printf("On a local kube-apiserver v1.37.2 with the loopback git server and registry: %d ManifestSyncs over %d source repositories and %d image tags, writing into %d branches of one destination repository; each app %s; interval %s; the controller (`sluice serve`, --concurrent 4, --registry-rps %g, --render-isolation %s) in its own process. GOMAXPROCS=%d.\n\n",
		total, s.repos, s.tags, s.branches, apps, s.interval, s.registryRPS, s.isolation, runtime.GOMAXPROCS(0))
	fmt.Println("| measure | result | target |")
	fmt.Println("|---|---:|---|")
	// The targets: issue 10's at 1,000 syncs, issue 27's at 10,000.
	tReady, tGit, tReg, tIdle, tRSS := "< 60 s", "≤ 50", "≤ 200", "≤ 2 s", "< 512 MiB"
	if total >= 10000 {
		tReady, tGit, tReg, tIdle, tRSS = "< 5 min", "≤ 501", "≤ 2,000", "≤ 10 s", "< 1 GiB"
	}
	fmt.Printf("| (a) applying %d syncs → all Ready | %s (created in %s; %d commits, %d git and %d registry requests; controller CPU %s with its workers) | %s |\n",
		total, round(allReady), round(applied), int(commitsA), gitAn, regAn, round(cpuA-cpu0), tReady)
	fmt.Printf("| (a) each sync Ready once (as bench flux measures Flux) | %s | |\n", round(eachOnce))
	fmt.Printf("| (a) renders in a warm worker / in a new one | %d / %d | |\n", int(warmA), int(newA))
	fmt.Printf("| (a) per sync: controller CPU (its workers' included), git and registry requests | %s, %.2f, %.2f | |\n", round((cpuA-cpu0)/time.Duration(total)), float64(gitAn)/float64(total), float64(regAn)/float64(total))
	fmt.Printf("| (a) kube-apiserver: CPU, requests by verb (the bench's own watch included) | %s (%s per sync); %s | |\n", round(apiCPUA-apiCPU0), round((apiCPUA-apiCPU0)/time.Duration(total)), apiReqA.since(apiReq0, total))
	fmt.Printf("| (a) baseline: `sluice hydrate` of the same syncs, cold, one run | %s (CPU %s, %d git requests) | |\n", round(cli.wall), round(cli.cpu), gitCLI)
	fmt.Printf("| (a) controller / command line | %.2fx | |\n", float64(allReady)/float64(cli.wall))
	fmt.Printf("| (b) one idle interval (%s): git requests | %d (%d ref advertisements, %d fetches) | %s |\n", s.interval, gitBn, int(lsB), int(fetchB), tGit)
	fmt.Printf("| (b) registry requests | %d | %s |\n", regBn, tReg)
	fmt.Printf("| (b) controller CPU | %s (%d renders; %d of %d still Ready) | %s |\n", round(cpuIdle), int(rendersB), idleReady, total, tIdle)
	fmt.Printf("| (b) kube-apiserver: CPU, requests by verb | %s; %s | |\n", round(apiCPUB1-apiCPUB0), apiReqB1.since(apiReqB0, 0))
	if s.outage > 0 {
		// Each source repository and the destination: repos+1.
		perRepoInterval := float64(outageReqs) / float64(s.repos+1) / (float64(s.outage) / float64(s.interval))
		fmt.Printf("| (b′) git server answering 503 for %s: git requests | %d (%.2f per repository per interval; %d of %d syncs still Ready at its end) | ≤ 2 per repository per interval |\n", s.outage, outageReqs, perRepoInterval, outageReady, total)
		fmt.Printf("| (b′) the server back → every sync Ready, nobody acting | %s | |\n", round(backAfter))
	}
	fmt.Printf("| (c) push changing %d app(s) + webhook → destination commits, %d pushes | p50 %s, p95 %s, max %s | p50 < 2 s |\n", s.touch, s.pushes, percentile(lat, 50), percentile(lat, 95), percentile(lat, 100))
	fmt.Printf("| (c) per push: renders, fetches (median; max) | %.0f, %.0f; %.0f, %.0f | %d, 1 |\n", medianOf(pushRenders), medianOf(pushFetches), slices.Max(pushRenders), slices.Max(pushFetches), s.touch)
	fmt.Printf("| (d) moved tag + registry notification → %d syncs re-pinned | %s | |\n", s.followers, round(repin))
	fmt.Printf("| (e) controller peak RSS | %d MiB (CPU over the whole run %s; render workers apart) | %s |\n", hwm/1024, round(cpuEnd-cpu0), tRSS)
	return nil
}

// startController starts the bench's cluster, its watch of the syncs of
// namespaces (made here; the first holds the webhook receiver's token)
// and `sluice serve` against it, and waits until the controller is
// ready. stop ends them all.
func (s *serveBench) startController(ctx context.Context, token string, namespaces ...string) (api apiServer, logf *os.File, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	cl, err := devcluster.Start(ctx, devcluster.Options{Dir: s.work, Build: true})
	if err != nil {
		return apiServer{}, nil, stop, err
	}
	stops = append(stops, func() { cl.Stop() })
	cl.Config.QPS, cl.Config.Burst = 200, 400
	if s.c, err = client.New(cl.Config, client.Options{Scheme: controller.Scheme()}); err != nil {
		return apiServer{}, nil, stop, err
	}
	watched := map[string]cache.Config{}
	for _, ns := range namespaces {
		watched[ns] = cache.Config{}
	}
	ca, err := cache.New(cl.Config, cache.Options{Scheme: controller.Scheme(), DefaultNamespaces: watched})
	if err != nil {
		return apiServer{}, nil, stop, err
	}
	if _, err := ca.GetInformer(ctx, &v1alpha1.ManifestSync{}); err != nil {
		return apiServer{}, nil, stop, err
	}
	cctx, stopCache := context.WithCancel(ctx)
	stops = append(stops, stopCache)
	go ca.Start(cctx)
	if !ca.WaitForCacheSync(ctx) {
		return apiServer{}, nil, stop, fmt.Errorf("the bench's cache never synced")
	}
	s.cached = ca
	api = apiServerOf(cl)
	for _, ns := range namespaces {
		if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return api, nil, stop, err
		}
	}
	if err := s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hooks", Namespace: serveNS, Labels: map[string]string{controller.ReceiverLabel: "true"}},
		StringData: map[string]string{"token": token}}); err != nil {
		return api, nil, stop, err
	}
	s.hook, s.metrics, s.pprof = freeAddr(), freeAddr(), freeAddr()
	health := freeAddr()
	logf, err = os.Create(filepath.Join(s.work, "controller.log"))
	if err != nil {
		return api, nil, stop, err
	}
	stops = append(stops, func() { logf.Close() })
	s.ctrl = exec.Command(s.bin, "serve", "--kubeconfig", cl.Kubeconfig, "--cache-dir", filepath.Join(s.work, "ctrl-cache"),
		"--hook-addr", s.hook, "--metrics-addr", s.metrics, "--health-addr", health, "--allow-remote-hosts", "127.0.0.1", "--render-isolation", s.isolation, "--pprof-addr", s.pprof,
		"--registry-rps", strconv.FormatFloat(s.registryRPS, 'g', -1, 64))
	s.ctrl.Stdout, s.ctrl.Stderr = logf, logf
	devcluster.DieWithParent(s.ctrl)
	if err := s.ctrl.Start(); err != nil {
		return api, logf, stop, err
	}
	stops = append(stops, func() { s.ctrl.Process.Kill(); s.ctrl.Wait() })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + health + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			return api, logf, stop, fmt.Errorf("the controller never got ready (see %s)", logf.Name())
		}
	}
	return api, logf, stop, nil
}

// createAll creates every sync of the estate newSync makes (16 at a
// time), and returns how long it took.
func (s *serveBench) createAll(ctx context.Context, newSync func(r, a int) *v1alpha1.ManifestSync) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, s.syncs)
	work := make(chan [2]int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ra := range work {
				if err := s.c.Create(ctx, newSync(ra[0], ra[1])); err != nil {
					errs <- err
				}
			}
		}()
	}
	for r := 0; r < s.repos; r++ {
		for a := 0; a < s.appsPerRepo(); a++ {
			work <- [2]int{r, a}
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return time.Since(start), err
	default:
		return time.Since(start), nil
	}
}

// allReady waits until total syncs are Ready, for at most 10 minutes
// from start.
func (s *serveBench) allReady(ctx context.Context, start time.Time, total int) error {
	return s.allReadyIn(ctx, serveNS, start, total)
}

// allReadyIn is allReady of the syncs of namespace ns.
func (s *serveBench) allReadyIn(ctx context.Context, ns string, start time.Time, total int) error {
	for {
		ready, _, err := s.readyIn(ctx, ns, "")
		if err != nil {
			return err
		}
		if s.everReady != nil && s.eachOnce.IsZero() && len(s.everReady) >= total {
			s.eachOnce = time.Now()
		}
		if ready == total {
			return nil
		}
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("%d of %d Ready after 10 minutes", ready, total)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// apiServer is the bench cluster's kube-apiserver: its process (a child
// of this one) and a client of its metrics.
type apiServer struct {
	pid int
	rc  rest.Interface
}

func apiServerOf(cl *devcluster.Cluster) apiServer {
	a := apiServer{pid: childNamed("kube-apiserver")}
	if cs, err := kubernetes.NewForConfig(cl.Config); err == nil {
		a.rc = cs.Discovery().RESTClient()
	}
	return a
}

// liveChildrenCPU is the CPU time of pid's children still running
// (warm render workers: their time reaches their parent's only once they
// end and are waited for).
func liveChildrenCPU(pid int) time.Duration {
	entries, _ := os.ReadDir("/proc")
	parent := strconv.Itoa(pid)
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		end := bytes.LastIndexByte(stat, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(string(stat[end+1:]))
		if len(f) > 12 && f[1] == parent {
			ut, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += ut + st
		}
	}
	return time.Duration(ticks) * time.Second / 100
}

// childNamed is the process of this one's children of that name (0:
// none).
func childNamed(name string) int {
	entries, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < 0 {
			continue
		}
		f := strings.Fields(string(stat[end+1:]))
		if string(stat[open+1:end]) == name && len(f) > 1 && f[1] == me {
			return pid
		}
	}
	return 0
}

// requestCounts are apiserver_request_total by verb.
type requestCounts map[string]float64

// requests reads the API server's request counts.
func (a apiServer) requests(ctx context.Context) requestCounts {
	out := requestCounts{}
	if a.rc == nil {
		return out
	}
	data, err := a.rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return out
	}
	verb := regexp.MustCompile(`^apiserver_request_total\{.*verb="([A-Z]+)".*\} ([0-9.e+]+)$`)
	for _, l := range strings.Split(string(data), "\n") {
		if m := verb.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			out[m[1]] += v
		}
	}
	return out
}

// since says the requests made since before, by verb, and per sync
// where per > 0.
func (r requestCounts) since(before requestCounts, per int) string {
	var parts []string
	total := 0.0
	for _, v := range []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"} {
		n := r[v] - before[v]
		if n == 0 {
			continue
		}
		total += n
		parts = append(parts, fmt.Sprintf("%s %d", v, int(n)))
	}
	s := fmt.Sprintf("%d requests (%s)", int(total), strings.Join(parts, ", "))
	if per > 0 {
		s += fmt.Sprintf(", %.2f per sync", total/float64(per))
	}
	return s
}

// saveProfile saves one of the controller's profiles (/debug/pprof/what)
// to file.
func (s *serveBench) saveProfile(file, what string) {
	resp, err := http.Get("http://" + s.pprof + "/debug/pprof/" + what)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: profile:", err)
		return
	}
	defer f.Close()
	io.Copy(f, resp.Body)
}

func hmacHex(token, body string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func post(url, body string, hdr map[string]string) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return fmt.Errorf("webhook: %d %s", resp.StatusCode, b.String())
	}
	return nil
}
