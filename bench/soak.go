package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller"
	"sluice.dev/sluice/internal/devcluster"
)

// The soak: two controller replicas (`sluice serve
// --enable-leader-election`, each its own process and cache) keep 200
// syncs over 20 source repositories for an hour, while a push lands every
// few seconds, the followed tag moves every minute, the leader is killed
// every ten minutes, and one fault of each kind is injected in turn. At
// the end every change must be in the destination, none committed twice,
// no folder back to an older state; and the controller's memory (RSS, its
// own part RssAnon, the live Go heap), goroutines and open files over the
// first ten minutes against the last, and within the process that led
// longest.
func mainSoak() {
	duration := flag.Duration("duration", time.Hour, "how long changes and faults go on (the figures need 20m or more)")
	syncs := flag.Int("syncs", 200, "ManifestSyncs")
	repos := flag.Int("repos", 20, "source repositories")
	interval := flag.Duration("interval", 30*time.Second, "the syncs' interval")
	pushEvery := flag.Duration("push-every", 3*time.Second, "a push to a source repository (one app's change, its webhook sent) this often")
	tagEvery := flag.Duration("tag-every", time.Minute, "the followed tag moves (the registry notifies) this often")
	killEvery := flag.Duration("kill-every", 10*time.Minute, "the leading replica is SIGKILLed (and started again, as its Deployment would) this often")
	faultEvery := flag.Duration("fault-every", 5*time.Minute, "the next fault in turn is injected this often")
	profiles := flag.String("profiles", "", "keep each controller process's first and latest heap profile (heap-<pid>-first.pb.gz, heap-<pid>-last.pb.gz) in this folder")
	flag.Parse()
	// net/http/cgi says each connection the faults cut; the figures are
	// what counts.
	log.SetOutput(io.Discard)
	tb := newTB()
	defer tb.cleanup()
	s := &soak{serveBench: &serveBench{tb: tb, syncs: *syncs, repos: *repos, tags: 40, branches: 5, interval: *interval, followers: 20, isolation: "process", touch: 1},
		duration: *duration, pushEvery: *pushEvery, tagEvery: *tagEvery, killEvery: *killEvery, faultEvery: *faultEvery, profiles: *profiles}
	if err := s.run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench soak:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

type soak struct {
	*serveBench
	duration, pushEvery, tagEvery, killEvery, faultEvery time.Duration
	profiles                                             string

	cl       *devcluster.Cluster
	start    time.Time
	mu       sync.Mutex
	replicas [2]*replica
	// changes per folder: what each app's configmap and first image
	// must end as, and how many changes each got.
	version map[string]int
	changes map[string]int
	digest  string // the followed tag's latest
	// tagging is set while the bench pushes an image: a registry fault
	// is the controllers', not the bench's.
	tagging  atomic.Bool
	faulting string // the fault going on, "" when none
	lat      []pushLatency
	samples  []sample
	events   []string
}

type replica struct {
	n                       int
	cmd                     *exec.Cmd
	started                 time.Time
	hook, metrics, pprof, h string
	exited                  chan struct{}
}

type pushLatency struct {
	d     time.Duration
	fault string
}

type sample struct {
	at                   time.Duration
	pid                  int
	leader               bool
	rssKiB, fds, threads int64
	// anonKiB is the process's own memory (RssAnon); fileKiB the pages of
	// its binary and other files mapped in (RssFile), shared with the
	// other replica and given back under pressure; heapKiB the Go heap
	// live at the last collection (go_gc_heap_live_bytes).
	anonKiB, fileKiB, heapKiB int64
	goroutines                int64
}

func (s *soak) logf(format string, args ...any) {
	line := fmt.Sprintf("%7s  ", time.Since(s.start).Round(time.Second)) + fmt.Sprintf(format, args...)
	fmt.Fprintln(os.Stderr, line)
	s.mu.Lock()
	s.events = append(s.events, line)
	s.mu.Unlock()
}

func (s *soak) run() error {
	ctx := context.Background()
	if err := s.setUp(); err != nil {
		return err
	}
	var err error
	if s.cl, err = devcluster.Start(ctx, devcluster.Options{Dir: s.work, Build: true}); err != nil {
		return err
	}
	defer s.cl.Stop()
	if s.c, err = client.New(s.cl.Config, client.Options{Scheme: controller.Scheme()}); err != nil {
		return err
	}
	ca, err := cache.New(s.cl.Config, cache.Options{Scheme: controller.Scheme(), DefaultNamespaces: map[string]cache.Config{serveNS: {}}})
	if err != nil {
		return err
	}
	if _, err := ca.GetInformer(ctx, &v1alpha1.ManifestSync{}); err != nil {
		return err
	}
	cctx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	go ca.Start(cctx)
	ca.WaitForCacheSync(ctx)
	s.cached = ca
	if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serveNS}}); err != nil {
		return err
	}
	const token = "soak-token"
	if err := s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hooks", Namespace: serveNS, Labels: map[string]string{controller.ReceiverLabel: "true"}},
		StringData: map[string]string{"token": token}}); err != nil {
		return err
	}
	s.start = time.Now()
	for i := range s.replicas {
		if err := s.startReplica(i); err != nil {
			return err
		}
	}
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, r := range s.replicas {
			r.cmd.Process.Signal(syscall.SIGCONT)
			r.cmd.Process.Kill()
			<-r.exited
		}
	}()

	n := s.appsPerRepo()
	s.version, s.changes = map[string]int{}, map[string]int{}
	for r := 0; r < s.repos; r++ {
		for a := 0; a < n; a++ {
			ms := s.manifestSync(r, a, "deploy")
			ms.Namespace = serveNS
			if err := s.c.Create(ctx, ms); err != nil {
				return err
			}
			s.changes[ms.Name] = 1 // the first commit
		}
	}
	total := s.repos * n
	if err := s.allReady(ctx, time.Now(), total); err != nil {
		return err
	}
	s.logf("%d syncs Ready", total)
	base := strings.TrimSpace(gitOut(s.dstDir, "for-each-ref", "--format=%(objectname) %(refname:short)", "refs/heads/"))

	end := time.Now().Add(s.duration)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	every := func(d time.Duration, f func(int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(d)
			defer t.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-t.C:
					f(i)
				}
			}
		}()
	}
	// Pushes: the apps in turn, each push its webhook.
	var pushes sync.WaitGroup
	every(s.pushEvery, func(i int) {
		r, a := i%s.repos, (i/s.repos)%n
		name := s.syncName(r, a)
		s.mu.Lock()
		s.version[name]++
		v := s.version[name]
		s.changes[name]++
		fault := s.faulting
		s.mu.Unlock()
		s.works[r].Write(map[string]string{fmt.Sprintf("app%02d/configmap.yaml", a): configMap(a, v)}).Commit(fmt.Sprintf("%s v%d", name, v))
		s.works[r].Push("main")
		t0 := time.Now()
		body := fmt.Sprintf(`{"ref":"refs/heads/main","repository":{"clone_url":%q}}`, s.srcURLs[r])
		s.postHook(body, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hmacHex(token, body)})
		pushes.Add(1)
		go func() {
			defer pushes.Done()
			path := fmt.Sprintf("%s:apps/%s/configmap-app%02d.yaml", s.branchOf(r*n+a), name, a)
			for time.Since(t0) < 15*time.Minute {
				// This change, or a later one of the same app that holds
				// it (two pushes close together land in one commit).
				if m := versionRE.FindStringSubmatch(gitOut(s.dstDir, "show", path)); m != nil && atoi(m[1]) >= v {
					s.mu.Lock()
					s.lat = append(s.lat, pushLatency{time.Since(t0), fault})
					s.mu.Unlock()
					return
				}
				time.Sleep(250 * time.Millisecond)
			}
		}()
	})
	// The followed tag moves; the registry notifies.
	every(s.tagEvery, func(int) {
		img, _ := random.Image(256, 1)
		s.tagging.Store(true)
		d := s.reg.PushImage(s.tb, s.tagOf(0), img)
		s.tagging.Store(false)
		s.mu.Lock()
		s.digest = d
		for i := 0; i < s.followers; i++ {
			s.changes[s.syncName(i/n, i%n)]++
		}
		s.mu.Unlock()
		rt := strings.SplitN(s.tagOf(0), ":", 2)
		note := fmt.Sprintf(`{"events":[{"action":"push","target":{"repository":%q,"tag":%q,"digest":%q},"request":{"host":%q}}]}`, rt[0], rt[1], d, s.reg.Host)
		s.postHook(note, map[string]string{"Authorization": "Bearer " + token})
	})
	// The leader killed.
	every(s.killEvery, func(int) {
		if i := s.leader(); i >= 0 {
			s.logf("SIGKILL the leader, replica %d (pid %d)", i, s.replicas[i].cmd.Process.Pid)
			s.replicas[i].cmd.Process.Kill()
		}
	})
	// Faults in turn.
	faults := s.faults()
	every(s.faultEvery, func(i int) {
		f := faults[i%len(faults)]
		s.mu.Lock()
		s.faulting = f.name
		s.mu.Unlock()
		s.logf("fault: %s", f.name)
		f.do()
		s.mu.Lock()
		s.faulting = ""
		s.mu.Unlock()
		s.logf("fault over: %s", f.name)
	})
	// Replicas that exit (killed, or stale and stopped) start again.
	every(time.Second, func(int) {
		for i := range s.replicas {
			select {
			case <-s.replicas[i].exited:
				// Why, kept: the work folder goes at the end.
				s.logf("replica %d exited (%s); started again; its log's last lines:\n%s", i, s.replicas[i].cmd.ProcessState, lastLines(filepath.Join(s.work, fmt.Sprintf("controller-%d.log", i)), 8))
				if err := s.startReplica(i); err != nil {
					s.logf("starting replica %d: %v", i, err)
				}
			default:
			}
		}
	})
	every(15*time.Second, func(int) { s.sample() })
	time.Sleep(time.Until(end))
	close(stop)
	wg.Wait()
	s.logf("changes stopped; waiting for the last to land")
	pushes.Wait()
	s.mu.Lock()
	digest := s.digest
	s.mu.Unlock()
	if digest != "" {
		for t0 := time.Now(); time.Since(t0) < 5*time.Minute; time.Sleep(time.Second) {
			if _, pinned, _ := s.ready(ctx, digest); pinned == s.followers {
				break
			}
		}
	}
	return s.report(ctx, base, total)
}

// fault is one fault of the rotation: do injects it and returns once it
// is over.
type fault struct {
	name string
	do   func()
}

// fromController tells the controllers' requests (go-git's) from the
// bench's own pushes (git's): the faults are the controllers'.
func fromController(r *http.Request) bool { return strings.HasPrefix(r.UserAgent(), "go-git") }

func (s *soak) faults() []fault {
	git := func(name string, d time.Duration, set, clear func()) fault {
		return fault{name, func() { set(); time.Sleep(d); clear() }}
	}
	return []fault{
		git("git server down (503) for 60s", time.Minute,
			func() {
				s.git.FailWith(func(r *http.Request) int {
					if fromController(r) {
						return http.StatusServiceUnavailable
					}
					return 0
				})
			}, func() { s.git.FailWith(nil) }),
		git("git server slow (10s a request) for 60s", time.Minute,
			func() {
				s.git.Delay(func(r *http.Request) time.Duration {
					if fromController(r) {
						return 10 * time.Second
					}
					return 0
				})
			}, func() { s.git.Delay(nil) }),
		git("git connections reset halfway through each pack for 60s", time.Minute,
			func() {
				s.git.CutAfter(func(r *http.Request) int64 {
					if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") && fromController(r) {
						return 200
					}
					return -1
				})
			}, func() { s.git.CutAfter(nil) }),
		git("registry 429 with Retry-After: 20 for 60s", time.Minute,
			func() {
				s.reg.RetryAfter(20)
				s.reg.FailWith(func(*http.Request) int {
					if s.tagging.Load() {
						return 0
					}
					return http.StatusTooManyRequests
				})
			}, func() { s.reg.FailWith(nil); s.reg.RetryAfter(0) }),
		git("registry 500 for 60s", time.Minute,
			func() {
				s.reg.FailWith(func(*http.Request) int {
					if s.tagging.Load() {
						return 0
					}
					return http.StatusInternalServerError
				})
			}, func() { s.reg.FailWith(nil) }),
		{"API server stopped for 30s", func() {
			if err := s.cl.StopAPIServer(); err != nil {
				s.logf("stopping the API server: %v", err)
			}
			time.Sleep(30 * time.Second)
			if err := s.cl.StartAPIServer(); err != nil {
				s.logf("starting the API server: %v", err)
			}
		}},
		{"the leader paused (SIGSTOP) for 30s, past its 15s lease, then resumed", func() {
			i := s.leader()
			if i < 0 {
				return
			}
			p := s.replicas[i].cmd.Process
			p.Signal(syscall.SIGSTOP)
			time.Sleep(30 * time.Second)
			p.Signal(syscall.SIGCONT)
		}},
	}
}

func (s *soak) startReplica(i int) error {
	r := &replica{n: i, hook: freeAddr(), metrics: freeAddr(), pprof: freeAddr(), h: freeAddr(), exited: make(chan struct{})}
	logf, err := os.OpenFile(filepath.Join(s.work, fmt.Sprintf("controller-%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	r.cmd = exec.Command(s.bin, "serve", "--kubeconfig", s.cl.Kubeconfig, "--cache-dir", filepath.Join(s.work, fmt.Sprintf("cache-%d", i)),
		"--enable-leader-election", "--leader-election-namespace", serveNS,
		"--hook-addr", r.hook, "--metrics-addr", r.metrics, "--health-addr", r.h, "--pprof-addr", r.pprof,
		"--allow-remote-hosts", "127.0.0.1", "--render-isolation", s.isolation)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	devcluster.DieWithParent(r.cmd)
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	r.started = time.Now()
	go func() { r.cmd.Wait(); logf.Close(); close(r.exited) }()
	s.mu.Lock()
	s.replicas[i] = r
	s.mu.Unlock()
	return nil
}

// leader is the replica leading now, -1 if none says so.
func (s *soak) leader() int {
	s.mu.Lock()
	reps := s.replicas
	s.mu.Unlock()
	for i, r := range reps {
		if r != nil && scrape(r.metrics, "leader_election_master_status") == 1 {
			return i
		}
	}
	return -1
}

// postHook sends a webhook to a replica that answers.
func (s *soak) postHook(body string, hdr map[string]string) {
	s.mu.Lock()
	reps := s.replicas
	s.mu.Unlock()
	for _, r := range reps {
		if post("http://"+r.hook+"/hook/"+serveNS+"/hooks", body, hdr) == nil {
			return
		}
	}
}

func (s *soak) sample() {
	lead := s.leader()
	s.mu.Lock()
	reps := s.replicas
	s.mu.Unlock()
	for i, r := range reps {
		pid := r.cmd.Process.Pid
		sm := sample{at: time.Since(s.start), pid: pid, leader: i == lead}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(st))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				sm.rssKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
			if v, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
				sm.anonKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
			if v, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
				sm.fileKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
			if v, ok := strings.CutPrefix(sc.Text(), "Threads:"); ok {
				sm.threads, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			sm.fds = int64(len(fds))
		}
		if resp, err := http.Get("http://" + r.pprof + "/debug/pprof/goroutine?debug=1"); err == nil {
			line, _ := bufio.NewReader(resp.Body).ReadString('\n')
			resp.Body.Close()
			sm.goroutines, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total ")), 10, 64)
		}
		if v := scrape(r.metrics, "go_gc_heap_live_bytes"); v >= 0 {
			sm.heapKiB = int64(v) / 1024
		} else {
			sm.heapKiB = -1
		}
		if s.profiles != "" {
			s.keepHeap(r.pprof, pid)
		}
		s.mu.Lock()
		s.samples = append(s.samples, sm)
		s.mu.Unlock()
	}
}

// keepHeap saves the process's heap profile as its first (once) and as its
// latest.
func (s *soak) keepHeap(addr string, pid int) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return
	}
	first := filepath.Join(s.profiles, fmt.Sprintf("heap-%d-first.pb.gz", pid))
	if _, err := os.Stat(first); errors.Is(err, fs.ErrNotExist) {
		os.WriteFile(first, b, 0o644)
	}
	os.WriteFile(filepath.Join(s.profiles, fmt.Sprintf("heap-%d-last.pb.gz", pid)), b, 0o644)
}

// scrape reads one gauge of a /metrics, -1 when unreachable.
func scrape(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return 0
}

func gitOut(dir string, args ...string) string {
	out, _ := exec.Command("git", append([]string{"--git-dir", dir}, args...)...).Output()
	return string(out)
}

// report checks the destination against the changes made and prints the
// figures.
func (s *soak) report(ctx context.Context, base string, total int) error {
	n := s.appsPerRepo()
	starts := map[string]string{} // branch → its commit when the soak began
	for _, line := range strings.Split(base, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			starts[f[1]] = f[0]
		}
	}
	// Each branch's commits since the soak began, oldest first, by the
	// folders they touch: one read of each branch's history (a read per
	// folder took hours at 10,000 folders).
	touched := map[string][]string{} // folder → its commits
	for branch, start := range starts {
		var commit string
		seen := map[string]bool{}
		for _, line := range strings.Split(gitOut(s.dstDir, "log", "--reverse", "--format=commit %H", "--name-only", start+".."+branch, "--", "apps/"), "\n") {
			if c, ok := strings.CutPrefix(line, "commit "); ok {
				commit, seen = c, map[string]bool{}
				continue
			}
			parts := strings.SplitN(line, "/", 3)
			if len(parts) < 3 || parts[0] != "apps" {
				continue
			}
			folder := "apps/" + parts[1]
			if !seen[folder] {
				seen[folder] = true
				touched[folder] = append(touched[folder], commit)
			}
		}
	}
	var made, committed, missed, doubled, regressed int
	var problems []string
	for r := 0; r < s.repos; r++ {
		for a := 0; a < n; a++ {
			name := s.syncName(r, a)
			branch := s.branchOf(r*n + a)
			folder := "apps/" + name
			made += s.changes[name] - 1
			// The folder's states, oldest first, from the soak's start.
			log := touched[folder]
			committed += len(log)
			if len(log) == 0 && s.version[name] == 0 && (r*n+a >= s.followers || s.digest == "") {
				continue // untouched, and nothing to find
			}
			seen := map[string]bool{strings.TrimSpace(gitOut(s.dstDir, "rev-parse", starts[branch]+":"+folder)): true}
			for _, c := range log {
				tree := strings.TrimSpace(gitOut(s.dstDir, "rev-parse", c+":"+folder))
				if seen[tree] {
					regressed++
					problems = append(problems, fmt.Sprintf("%s: commit %.12s puts the folder back to a state it had", folder, c))
				}
				seen[tree] = true
			}
			if len(log) > s.changes[name]-1 {
				doubled++
				problems = append(problems, fmt.Sprintf("%s: %d commits for %d changes", folder, len(log), s.changes[name]-1))
			}
			cm := gitOut(s.dstDir, "show", fmt.Sprintf("%s:%s/configmap-app%02d.yaml", branch, folder, a))
			if v := s.version[name]; v > 0 && !regexp.MustCompile(fmt.Sprintf(`v: ['"]%d['"]`, v)).MatchString(cm) {
				missed++
				problems = append(problems, fmt.Sprintf("%s: the last change (v%d) is not in the destination", folder, v))
			}
			if r*n+a < s.followers && s.digest != "" && !strings.Contains(gitOut(s.dstDir, "show", fmt.Sprintf("%s:%s/deployment-app%02d.yaml", branch, folder, a)), s.digest) {
				missed++
				problems = append(problems, fmt.Sprintf("%s: not pinned to the followed tag's last digest %s", folder, s.digest))
			}
		}
	}
	ready, _, _ := s.ready(ctx, "")

	fmt.Printf("Soak: %d ManifestSyncs over %d source repositories (interval %s), two replicas of `sluice serve --enable-leader-election` (each its own process and cache), on a local kube-apiserver v1.37.2 with etcd, the loopback git server and registry; for %s: a push (one app's change, with its webhook) every %s, the followed tag (%d syncs) moved with a registry notification every %s, the leader SIGKILLed every %s, a fault every %s in turn. GOMAXPROCS=%d.\n\n",
		total, s.repos, s.interval, s.duration, s.pushEvery, s.followers, s.tagEvery, s.killEvery, s.faultEvery, runtime.GOMAXPROCS(0))
	fmt.Println("| measure | result | target |")
	fmt.Println("|---|---:|---|")
	fmt.Printf("| changes made (pushes, and tag moves × their syncs) | %d | |\n", made)
	fmt.Printf("| commits touching those folders | %d (fewer: changes of one folder that landed in one commit) | ≤ changes |\n", committed)
	fmt.Printf("| folders missing their last change | %d | 0 |\n", missed)
	fmt.Printf("| folders with more commits than changes | %d | 0 |\n", doubled)
	fmt.Printf("| commits putting a folder back to an earlier state | %d | 0 |\n", regressed)
	fmt.Printf("| syncs Ready at the end | %d of %d | all |\n", ready, total)
	var all, calm, faulted []time.Duration
	for _, l := range s.lat {
		all = append(all, l.d)
		if l.fault == "" {
			calm = append(calm, l.d)
		} else {
			faulted = append(faulted, l.d)
		}
	}
	pushed := 0
	for _, v := range s.version {
		pushed += v
	}
	fmt.Printf("| push → commit, all %d pushes (%d seen landing) | p50 %s, p95 %s, max %s | |\n", pushed, len(all), percentile(all, 50), percentile(all, 95), percentile(all, 100))
	fmt.Printf("| push → commit, no fault going on (%d) | p50 %s, p95 %s | p50 < 2 s |\n", len(calm), percentile(calm, 50), percentile(calm, 95))
	fmt.Printf("| push → commit, during a fault (%d) | p50 %s, p95 %s | |\n", len(faulted), percentile(faulted, 50), percentile(faulted, 95))
	first, last := window(s.samples, 2*time.Minute, 12*time.Minute), window(s.samples, s.duration-10*time.Minute, s.duration)
	fmt.Printf("| leader RSS, first 10 min → last 10 min (mean of samples every 15 s) | %s → %s | |\n", mib(first, func(x sample) int64 { return x.rssKiB }), mib(last, func(x sample) int64 { return x.rssKiB }))
	fmt.Printf("| leader private memory (RssAnon) | %s → %s | flat |\n", mib(first, func(x sample) int64 { return x.anonKiB }), mib(last, func(x sample) int64 { return x.anonKiB }))
	fmt.Printf("| leader goroutines | %s → %s | flat |\n", mean(first, func(x sample) int64 { return x.goroutines }), mean(last, func(x sample) int64 { return x.goroutines }))
	fmt.Printf("| leader open files | %s → %s | flat |\n", mean(first, func(x sample) int64 { return x.fds }), mean(last, func(x sample) int64 { return x.fds }))
	fmt.Printf("| leader threads | %s → %s | |\n", mean(first, func(x sample) int64 { return x.threads }), mean(last, func(x sample) int64 { return x.threads }))
	if pid, early, late := longestLeader(s.samples); pid != 0 {
		span := late[len(late)-1].at - early[0].at
		fmt.Printf("| one process (the longest leader, %s leading): RSS, first third → last third | %s → %s | |\n", span.Round(time.Second), mib(early, func(x sample) int64 { return x.rssKiB }), mib(late, func(x sample) int64 { return x.rssKiB }))
		fmt.Printf("| that process's private memory (RssAnon) | %s → %s | flat |\n", mib(early, func(x sample) int64 { return x.anonKiB }), mib(late, func(x sample) int64 { return x.anonKiB }))
		fmt.Printf("| that process's live Go heap (go_gc_heap_live_bytes) | %s → %s | flat |\n", mib(early, func(x sample) int64 { return x.heapKiB }), mib(late, func(x sample) int64 { return x.heapKiB }))
		fmt.Printf("| that process's mapped file pages (RssFile: its binary, shared with the other replica) | %s → %s | |\n", mib(early, func(x sample) int64 { return x.fileKiB }), mib(late, func(x sample) int64 { return x.fileKiB }))
		fmt.Printf("| that process's goroutines | %s → %s | flat |\n", mean(early, func(x sample) int64 { return x.goroutines }), mean(late, func(x sample) int64 { return x.goroutines }))
		fmt.Printf("| that process's open files | %s → %s | flat |\n", mean(early, func(x sample) int64 { return x.fds }), mean(late, func(x sample) int64 { return x.fds }))
		// Thirds include the warm-up (a clone reaches its bound of packs
		// in some minutes): the same, 5 minutes at a time.
		ws := leaderWindows(s.samples, pid, 5*time.Minute)
		row := func(f func([]sample) string) string {
			var out []string
			for _, w := range ws {
				out = append(out, f(w))
			}
			return strings.Join(out, ", ")
		}
		fmt.Printf("| that process, mean of each 5 minutes leading: RssAnon | %s | flat once warm |\n", row(func(w []sample) string { return mib(w, func(x sample) int64 { return x.anonKiB }) }))
		fmt.Printf("| … live Go heap | %s | flat once warm |\n", row(func(w []sample) string { return mib(w, func(x sample) int64 { return x.heapKiB }) }))
		fmt.Printf("| … open files | %s | flat once warm |\n", row(func(w []sample) string { return mean(w, func(x sample) int64 { return x.fds }) }))
	}
	fmt.Println()
	fmt.Println("Events:")
	for _, e := range s.events {
		fmt.Println("    " + e)
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		for _, p := range problems[:min(len(problems), 20)] {
			fmt.Println("  problem:", p)
		}
		return fmt.Errorf("%d folders missed a change, %d have more commits than changes, %d went back (controller logs under %s)", missed, doubled, regressed, s.work)
	}
	return nil
}

// window is the leader's samples between from and to (since the start).
func window(all []sample, from, to time.Duration) []sample {
	var out []sample
	for _, x := range all {
		if x.leader && x.at >= from && x.at < to {
			out = append(out, x)
		}
	}
	return out
}

// leaderWindows splits pid's samples as leader into windows of d from its
// first, in order; a window without samples is left out.
func leaderWindows(all []sample, pid int, d time.Duration) [][]sample {
	var out [][]sample
	var start time.Duration = -1
	for _, x := range all {
		if !x.leader || x.pid != pid {
			continue
		}
		if start < 0 {
			start = x.at
		}
		i := int((x.at - start) / d)
		for len(out) <= i {
			out = append(out, nil)
		}
		out[i] = append(out[i], x)
	}
	return slices.DeleteFunc(out, func(w []sample) bool { return len(w) == 0 })
}

// longestLeader is the process that led the longest without a break,
// and the first and last thirds of its samples as leader (after its
// first minute, which warms its caches up): the growth of one process,
// which the whole run's windows cannot show when the leader is killed
// in between.
func longestLeader(all []sample) (pid int, early, late []sample) {
	var best, run []sample
	for _, x := range all {
		if !x.leader {
			continue
		}
		if len(run) > 0 && run[0].pid != x.pid {
			run = nil
		}
		run = append(run, x)
		if len(run) > len(best) {
			best = slices.Clone(run)
		}
	}
	if len(best) > 0 {
		warm := best[0].at + time.Minute
		for len(best) > 0 && best[0].at < warm {
			best = best[1:]
		}
	}
	if len(best) < 6 {
		return 0, nil, nil
	}
	third := len(best) / 3
	return best[0].pid, best[:third], best[len(best)-third:]
}

func mean(xs []sample, f func(sample) int64) string {
	if len(xs) == 0 {
		return "–"
	}
	var sum int64
	for _, x := range xs {
		sum += f(x)
	}
	return strconv.FormatInt(sum/int64(len(xs)), 10)
}

func mib(xs []sample, f func(sample) int64) string {
	if len(xs) == 0 {
		return "–"
	}
	var sum, n int64
	for _, x := range xs {
		if v := f(x); v >= 0 { // -1: not read at that sample
			sum += v
			n++
		}
	}
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%d MiB", sum/n/1024)
}

// version is an app's configmap version as the destination holds it.
var versionRE = regexp.MustCompile(`v: ['"](\d+)['"]`)

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// lastLines is the last n lines of a file, indented, after the last line
// that says why a Go program died (a panic, a fatal error), if any.
func lastLines(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	why := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			why = "    " + l + "\n    ...\n"
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return why + "    " + strings.Join(lines, "\n    ")
}
