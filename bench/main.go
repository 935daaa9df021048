// Command bench measures Sluice against the tools it replaces, each
// baseline in the same run, and prints markdown tables.
//
//	go run ./bench hydrate [-overlays 200] [-bases 20] [-charts 20] [-only charts]
//	go run ./bench apply   [-n 10]
//	go run ./bench run     [-n 50]
//	go run ./bench takeover [-size 8388608]
//	go run ./bench render  [-overlays 200] [-apps 31] [-n 5] [-charts 30]
//	go run ./bench serve   [-syncs 1000] [-repos 50] [-tags 200] [-branches 10] [-interval 1m] [-oci]
//
// hydrate: `sluice hydrate` on a synthetic monorepo (200 kustomize overlays
// over 20 shared bases, and 20 Helm charts) against the baseline hydros and
// kargo-render use today: one `kubectl kustomize` process per overlay, one
// after the other; a git server (git-http-backend) and an OCI registry run
// on loopback. apply: `sluice apply` of a 60-object kustomization against
// `kubectl apply --server-side -k`, on a real API server started here.
// run: the time from a file write to the API server's acknowledgement in a
// `sluice run` session, against `kubectl apply --server-side -k` per save.
// takeover: a RepoConfig of 10 Images and 30 ManifestSyncs: an unchanged
// build, and a takeover that rebuilds one image, against that image's
// layer upload alone. serve: `sluice serve` reconciling 1,000
// ManifestSyncs on a real API server: to Ready, an idle interval, webhook
// pushes, a moved tag (against one cold `sluice hydrate` of the same
// syncs); with -oci, the estate into signed OCI artifacts beside the same
// estate into git branches, and the cost of signing an artifact.
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/crypto/ssh"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"sluice.dev/sluice/internal/testenv"
)

func main() {
	mode := "hydrate"
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		mode = os.Args[1]
		os.Args = append(os.Args[:1], os.Args[2:]...)
	}
	// envtest and the clients log through controller-runtime; the tables
	// are the output (without a logger, controller-runtime prints a stack).
	ctrllog.SetLogger(logr.Discard())
	switch mode {
	case "hydrate":
		mainHydrate()
	case "apply":
		mainApply()
	case "run":
		mainRun()
	case "takeover":
		mainTakeover()
	case "render":
		mainRender()
	case "serve":
		mainServe()
	case "soak":
		mainSoak()
	case "dashboard":
		mainDashboard()
	case "flux":
		mainFlux()
	case "preview":
		mainPreview()
	case "preview-serve":
		mainPreviewServe()
	default:
		fmt.Fprintf(os.Stderr, "bench: unknown benchmark %q (hydrate, render, apply, run, takeover, serve, soak, flux, dashboard, preview, preview-serve)\n", mode)
		os.Exit(2)
	}
}

func mainHydrate() {
	overlays := flag.Int("overlays", 200, "kustomize overlays")
	bases := flag.Int("bases", 20, "shared kustomize bases")
	charts := flag.Int("charts", 20, "Helm charts")
	keep := flag.Bool("keep", false, "keep the work directory")
	hold := flag.Bool("hold", false, "after measuring, keep the servers up and print a command that reruns (c), until stdin closes")
	only := flag.String("only", "", "charts: only the public charts for their deployer ((g), (g'))")
	flag.Parse()
	tb := newTB()
	defer tb.cleanup()
	if *keep {
		tb.keep = true
	}
	holdServers = *hold
	run := run
	if *only == "charts" {
		run = func(tb *benchTB, _, _, _ int) error {
			work := tb.TempDir()
			bin, _, err := tools(work)
			if err != nil {
				return err
			}
			return printChartHydrations(bin, filepath.Join(work, "cache-charts"), testenv.NewGitServer(tb), tb)
		}
	}
	if err := run(tb, *overlays, *bases, *charts); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

// measurement is one timed process (or sequence of processes).
type measurement struct {
	name  string
	wall  time.Duration
	cpu   time.Duration
	maxRS int64 // KiB
	// private is anonymous memory, KiB, where known: a render worker's
	// at its answer; a command's peak, sampled every 2 ms.
	private int64
	note    string
}

var holdServers bool

func run(tb *benchTB, nOverlays, nBases, nCharts int) error {
	work := tb.TempDir()
	bin, kubectl, err := tools(work)
	if err != nil {
		return err
	}

	reg := testenv.NewRegistry(tb)
	// Every image signed as cosign signs, for (e).
	cosignKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	// And keylessly, by a CI identity of a test Sigstore, for (f).
	sigstore := testenv.NewSigstore(tb)
	ci := testenv.Keyless{Issuer: "https://ci.example.com", Subject: "https://ci.example.com/team/release@refs/heads/main"}
	push := func(repoTag string) {
		d := reg.Push(tb, repoTag)
		repo, _, _ := strings.Cut(repoTag, ":")
		testenv.CosignSign(tb, reg, repo, d, d, cosignKey)
		sigstore.Sign(tb, reg, repo, d, ci)
	}
	for i := 0; i < nBases; i++ {
		push(fmt.Sprintf("team/svc%02d:latest", i))
		push(fmt.Sprintf("team/svc%02d:dev", i))
	}
	for i := 0; i < nCharts; i++ {
		push(fmt.Sprintf("team/chart%02d:1.0.0", i))
	}
	git := testenv.NewGitServer(tb)
	srcURL := git.CreateRepo(tb, "monorepo")
	src := testenv.NewWork(tb, srcURL)
	src.Write(monorepo(reg.Host, nOverlays, nBases, nCharts)).Commit("synthetic monorepo")
	src.Push("main")
	dstURL := git.CreateRepo(tb, "deploy")
	dst2URL := git.CreateRepo(tb, "deploy-warm")
	dst3URL := git.CreateRepo(tb, "deploy-in-process")
	dst4URL := git.CreateRepo(tb, "deploy-verified")
	syncs := filepath.Join(work, "syncs")
	syncs2 := filepath.Join(work, "syncs-warm")
	syncs3 := filepath.Join(work, "syncs-in-process")
	writeSyncs(syncs, srcURL, dstURL, reg.Host, nOverlays, nCharts)
	writeSyncs(syncs2, srcURL, dst2URL, reg.Host, nOverlays, nCharts)
	writeSyncs(syncs3, srcURL, dst3URL, reg.Host, nOverlays, nCharts)
	syncs4 := filepath.Join(work, "syncs-verified")
	writeSyncsWith(syncs4, srcURL, dst4URL, reg.Host, nOverlays, nCharts, "    verify: {provider: cosign, secretRef: {name: cosign}}\n")
	dst5URL := git.CreateRepo(tb, "deploy-keyless")
	dst6URL := git.CreateRepo(tb, "deploy-self")
	syncs6 := filepath.Join(work, "syncs-self")
	writeSyncs(syncs6, srcURL, dst6URL, reg.Host, nOverlays, nCharts)
	// sluice alone, without its worker binary: its workers are itself
	// re-executed, as before sluice-render.
	alone := filepath.Join(work, "alone", "sluice")
	if err := os.MkdirAll(filepath.Dir(alone), 0o755); err != nil {
		return err
	}
	if data, err := os.ReadFile(bin); err != nil || os.WriteFile(alone, data, 0o755) != nil {
		return fmt.Errorf("copying sluice alone: %v", err)
	}
	syncs5 := filepath.Join(work, "syncs-keyless")
	writeSyncsWith(syncs5, srcURL, dst5URL, reg.Host, nOverlays, nCharts, fmt.Sprintf("    verify: {provider: cosign, keyless: {issuer: %q, subject: %q}}\n", ci.Issuer, ci.Subject))
	trustedRoot := filepath.Join(work, "trusted_root.json")
	os.WriteFile(trustedRoot, sigstore.TrustedRoot(tb), 0o644)
	cosignPub := filepath.Join(work, "cosign.pub")
	os.WriteFile(cosignPub, testenv.CosignPublicKey(tb, cosignKey), 0o644)
	_, signPriv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(signPriv, "")
	if err != nil {
		return err
	}
	signingKey := filepath.Join(work, "signing-key")
	os.WriteFile(signingKey, pem.EncodeToMemory(block), 0o600)
	cache := filepath.Join(work, "cache")

	phase := 0
	hydrateWith := func(bin, name, dir string, flags ...string) (measurement, error) {
		// BENCH_PROFILE=prefix writes a CPU profile of each sluice run.
		phase++
		if p := os.Getenv("BENCH_PROFILE"); p != "" {
			os.Setenv("SLUICE_CPUPROFILE", fmt.Sprintf("%s.%d", p, phase))
		}
		m, out, err := timed(name, bin, append([]string{"hydrate", "-f", dir, "--cache-dir", cache, "-o", "json"}, flags...)...)
		if err != nil {
			return m, fmt.Errorf("%s: %w\n%s", name, err, tail(out))
		}
		m.note = summarize(out)
		return m, nil
	}
	hydrate := func(name, dir string, flags ...string) (measurement, error) {
		return hydrateWith(bin, name, dir, flags...)
	}
	var ms []measurement
	cold, err := hydrate("(a) sluice hydrate, cold cache", syncs)
	if err != nil {
		return err
	}
	ms = append(ms, cold)
	warm, err := hydrate("(a) sluice hydrate, warm cache", syncs2)
	if err != nil {
		return err
	}
	ms = append(ms, warm)
	// What warm workers save: the same, a new worker for every render.
	dst7URL := git.CreateRepo(tb, "deploy-per-render")
	syncs7 := filepath.Join(work, "syncs-per-render")
	writeSyncs(syncs7, srcURL, dst7URL, reg.Host, nOverlays, nCharts)
	perRender, err := hydrate("(a) sluice hydrate, warm cache, --render-isolation render (a new worker for every render)", syncs7, "--render-isolation", "render")
	if err != nil {
		return err
	}
	perRender.note += fmt.Sprintf("; warm workers save %.0f%% of its wall, %.0f%% of its CPU", 100-100*float64(warm.wall)/float64(perRender.wall), 100-100*float64(warm.cpu)/float64(perRender.cpu))
	ms = append(ms, perRender)
	// What the worker binary saves: the same, each worker sluice itself.
	self, err := hydrateWith(alone, "(a) sluice hydrate, warm cache, workers sluice re-executed (no sluice-render beside it), a new worker for every render", syncs6, "--render-isolation", "render")
	if err != nil {
		return err
	}
	self.note += fmt.Sprintf("; sluice-render saves %.0f%% of its wall, %.0f%% of its CPU", 100-100*float64(perRender.wall)/float64(self.wall), 100-100*float64(perRender.cpu)/float64(self.cpu))
	ms = append(ms, self)
	// The cost of isolation: the same, each render in this process.
	inProcess, err := hydrate("(a') sluice hydrate --render-isolation none, warm cache", syncs3, "--render-isolation", "none")
	if err != nil {
		return err
	}
	inProcess.note += "; renders in the hydrate process: what isolation costs is (a) less this"
	ms = append(ms, inProcess)
	// The cost of verification: (a') with every image's cosign signature
	// checked before it is pinned and the commit signed.
	verified, err := hydrate("(e) as (a'), every image verified (cosign) and the commit signed (SSH)", syncs4, "--render-isolation", "none", "--cosign-key", cosignPub, "--signing-key", signingKey)
	if err != nil {
		return err
	}
	verified.note += fmt.Sprintf("; %.2fx (a')'s wall, %.2fx its CPU", float64(verified.wall)/float64(inProcess.wall), float64(verified.cpu)/float64(inProcess.cpu))
	ms = append(ms, verified)
	keyless, err := hydrate("(f) as (a'), every image verified keylessly (cosign, Fulcio certificate, Rekor bundle)", syncs5, "--render-isolation", "none", "--trusted-root", trustedRoot)
	if err != nil {
		return err
	}
	keyless.note += fmt.Sprintf("; %.2fx (a')'s wall, %.2fx its CPU", float64(keyless.wall)/float64(inProcess.wall), float64(keyless.cpu)/float64(inProcess.cpu))
	ms = append(ms, keyless)

	// (b) the baseline: one kubectl kustomize per overlay, in sequence, on
	// a checked-out tree (its clone not counted).
	var base measurement
	base.name = "(b) kubectl kustomize per overlay, sequential"
	for i := 0; i < nOverlays; i++ {
		m, out, err := timed("", kubectl, "kustomize", filepath.Join(src.Dir, "overlays", fmt.Sprintf("o%03d", i)))
		if err != nil {
			return fmt.Errorf("kubectl kustomize: %w\n%s", err, tail(out))
		}
		base.wall += m.wall
		base.cpu += m.cpu
		base.maxRS = max(base.maxRS, m.maxRS)
	}
	base.note = fmt.Sprintf("%d overlays only (no helm binary here for the %d charts)", nOverlays, nCharts)
	ms = append(ms, base)

	noop, err := hydrate("(c) no-op rerun", syncs)
	if err != nil {
		return err
	}
	ms = append(ms, noop)

	src.Write(map[string]string{"overlays/o007/replicas.yaml": patch("svc07", 9)}).Commit("one overlay")
	src.Push("main")
	one, err := hydrate("(d) rerun after one overlay changed", syncs)
	if err != nil {
		return err
	}
	ms = append(ms, one)

	// The fixed floor of any run: starting the binary, and the git server
	// answering one ref advertisement (what a run needs at least per
	// repository).
	floor, _, err := timed("(floor) sluice version: process start", bin, "version")
	if err != nil {
		return err
	}
	floor.note = "no work: the part of every run that is process start"
	ls, out, err := timed("(floor) git ls-remote of the source", "git", "ls-remote", srcURL)
	if err != nil {
		return fmt.Errorf("git ls-remote: %w\n%s", err, out)
	}
	ls.note = "one ref advertisement through git-http-backend"
	ms = append(ms, floor, ls)

	fmt.Printf("Synthetic monorepo: %d overlays over %d bases, %d charts; %d syncs into one branch. GOMAXPROCS=%d.\n\n",
		nOverlays, nBases, nCharts, nOverlays+nCharts, runtime.GOMAXPROCS(0))
	fmt.Println("| run | wall | CPU | peak RSS | vs (a) cold | vs (b) | result |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---|")
	for _, m := range ms {
		fmt.Printf("| %s | %s | %s | %d MiB | %.1f%% | %.2fx | %s |\n", m.name, round(m.wall), round(m.cpu), m.maxRS/1024,
			100*float64(m.wall)/float64(cold.wall), float64(base.wall)/float64(m.wall), m.note)
	}
	fmt.Printf("\nTargets: (a) ≥4x faster than (b): cold %.2fx, warm %.2fx; (c) <5%% of (a): %.1f%%; (d) <10%% of (a): %.1f%%; peak RSS <1 GiB: %d MiB.\n",
		float64(base.wall)/float64(cold.wall), float64(base.wall)/float64(warm.wall),
		100*float64(noop.wall)/float64(cold.wall), 100*float64(one.wall)/float64(cold.wall), max(cold.maxRS, warm.maxRS)/1024)
	// Charts for their deployer: what encrypting their Secrets costs, and
	// what an unchanged one costs (nothing encrypted again).
	if err := printChartHydrations(bin, filepath.Join(work, "cache-charts"), git, tb); err != nil {
		return err
	}
	if holdServers {
		fmt.Fprintf(os.Stderr, "servers up; rerun (c) with:\n  %s hydrate -f %s --cache-dir %s -o json\nsource clone: %s\nclose stdin to stop\n", bin, syncs, cache, src.Dir)
		io.Copy(io.Discard, os.Stdin)
	}
	return nil
}

func round(d time.Duration) time.Duration {
	if d > 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// timed runs a command and measures its wall time, CPU time (user+system)
// and peak resident set.
func timed(name, bin string, args ...string) (measurement, string, error) {
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	m := measurement{name: name}
	err := runWatched(cmd, &m)
	m.wall = time.Since(start)
	return m, out.String(), err
}

// runWatched runs cmd and fills m's CPU time (its children's, render
// workers', included, as the kernel counts them once they are waited for)
// and peak resident set: the kernel's high-water mark of the process's own
// memory, its workers' not included, read as it runs (its rusage's would
// count this process's too: a child started with vfork takes its parent's
// high-water mark into its own at exec).
func runWatched(cmd *exec.Cmd, m *measurement) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	peak := make(chan [2]int64, 1)
	go func() {
		var hwm, anon int64
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			h, a := memStatus(cmd.Process.Pid)
			hwm, anon = max(hwm, h), max(anon, a)
			select {
			case <-done:
				peak <- [2]int64{hwm, anon}
				return
			case <-t.C:
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	p := <-peak
	m.maxRS, m.private = p[0], p[1]
	if cmd.ProcessState != nil {
		m.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return err
}

// vmHWM is a running process's peak resident set, in KiB (0 once it
// ended).
func vmHWM(pid int) int64 {
	hwm, _ := memStatus(pid)
	return hwm
}

// memStatus reads a process's peak resident set (VmHWM) and its
// anonymous resident memory now (RssAnon: its private memory, heap and
// stacks, without the binary's pages), KiB.
func memStatus(pid int) (hwm, anon int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		for key, v := range map[string]*int64{"VmHWM:": &hwm, "RssAnon:": &anon} {
			if rest, ok := strings.CutPrefix(l, key); ok {
				fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), v)
			}
		}
	}
	return hwm, anon
}

func summarize(jsonOut string) string {
	counts := map[string]int{}
	for _, r := range []string{"committed", "unchanged", "failed"} {
		counts[r] = strings.Count(jsonOut, `"result": "`+r+`"`)
	}
	rendered := strings.Count(jsonOut, `"rendered": true`)
	return fmt.Sprintf("%d committed, %d unchanged, %d rendered", counts["committed"], counts["unchanged"], rendered)
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// tools builds sluice into work and finds the kubectl of the baselines.
func tools(work string) (sluice, kubectl string, err error) {
	sluice = filepath.Join(work, "sluice")
	// With its render worker beside it, built together, as make build
	// and the image build them.
	id := fmt.Sprintf("-X sluice.dev/sluice/internal/sandbox.build=bench-%d", time.Now().UnixNano())
	build := exec.Command("go", "build", "-ldflags", id, "-o", work+"/", "./cmd/sluice", "./cmd/sluice-render")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return "", "", fmt.Errorf("building sluice: %w", err)
	}
	if kubectl, err = exec.LookPath("kubectl"); err != nil {
		return "", "", fmt.Errorf("the baselines need kubectl: %w", err)
	}
	return sluice, kubectl, nil
}
