package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/source"
)

// mainRender compares `sluice render` with the kustomize CLI of the same
// kustomize release (v5.8.2 for sigs.k8s.io/kustomize/api v0.21.2, built
// from the module proxy by hack/kustomize/build.sh), process for process:
// on every overlay of the hydrate benchmark's monorepo, and on a generated
// tree the size of kubeflow's example overlay. Both print to /dev/null.
func mainRender() {
	overlays := flag.Int("overlays", 200, "monorepo overlays")
	apps := flag.Int("apps", 31, "apps of the kubeflow-sized tree (22 objects each)")
	n := flag.Int("n", 5, "runs of the kubeflow-sized render, each tool")
	charts := flag.Int("charts", 30, "renders of each public chart, each way")
	keep := flag.Bool("keep", false, "keep the work directory")
	flag.Parse()
	tb := newTB()
	tb.keep = *keep
	defer tb.cleanup()
	chartRuns = *charts
	if err := runRender(tb, *overlays, *apps, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

// chartRuns is how many times each public chart is rendered, each way.
var chartRuns = 30

func runRender(tb *benchTB, nOverlays, apps, n int) error {
	work := tb.TempDir()
	bin, _, err := tools(work)
	if err != nil {
		return err
	}
	kustomize, err := kustomizeCLI()
	if err != nil {
		return err
	}
	mono := filepath.Join(work, "monorepo")
	if err := writeFiles(mono, monorepo("registry.example.com", nOverlays, 20, 0)); err != nil {
		return err
	}
	kf := filepath.Join(work, "kubeflow")
	if err := writeFiles(kf, kubeflowLike(apps)); err != nil {
		return err
	}
	// Outside a git work tree, sluice render reads from the filesystem's
	// root, as kustomize does.
	once := func(tool, dir string) (measurement, []byte, error) {
		args := []string{"render", dir}
		if tool == kustomize {
			args = []string{"build", dir}
		}
		cmd := exec.Command(tool, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		var m measurement
		err := runWatched(cmd, &m)
		m.wall = time.Since(start)
		if err != nil {
			return m, nil, fmt.Errorf("%s %s: %w\n%s", filepath.Base(tool), strings.Join(args, " "), err, tail(errb.String()))
		}
		return m, out.Bytes(), nil
	}
	// Both must print the same bytes, or the comparison means nothing.
	same := func(dir string, a, b []byte) error {
		if !bytes.Equal(a, b) {
			return fmt.Errorf("%s: sluice render and kustomize build print different output", dir)
		}
		return nil
	}

	type row struct {
		name           string
		sluice, kustom measurement
		note           string
	}
	var rows []row
	// A render as hydrate and the controller make it: in a worker process
	// of the same binary, its CPU and peak RSS its own (the process that
	// serves it its files spends a few milliseconds more).
	var used sandbox.Usage
	observe := func(u sandbox.Usage) { used = u }
	sbSelf, err := sandbox.New(sandbox.Options{Command: []string{bin, sandbox.WorkerArg}, Observe: observe})
	if err != nil {
		return err
	}
	defer sbSelf.Close()
	// The worker binary of its own (cmd/sluice-render), as sluice starts
	// it when installed beside it.
	sbOwn, err := sandbox.New(sandbox.Options{Command: []string{filepath.Join(filepath.Dir(bin), sandbox.WorkerBinary), sandbox.WorkerArg}, Observe: observe})
	if err != nil {
		return err
	}
	defer sbOwn.Close()
	worker := func(sb *sandbox.Sandbox, d sandbox.Domain, root, dir string, kout []byte) (measurement, error) {
		fsys, err := source.Dir(root)
		if err != nil {
			return measurement{}, err
		}
		defer fsys.Close()
		start := time.Now()
		res, err := sb.RenderIn(context.Background(), d, fsys, dir, render.Options{})
		m := measurement{wall: time.Since(start), cpu: used.CPU, maxRS: used.MaxRSS >> 10, private: used.Private >> 10}
		if err != nil {
			return m, fmt.Errorf("a worker's render of %s: %w", dir, err)
		}
		want, err := render.DecodeOutput(kout, render.Limits{})
		if err != nil {
			return m, err
		}
		got, _ := res.YAML()
		if wy, _ := (&render.Result{Objects: want}).YAML(); !bytes.Equal(got, wy) {
			return m, fmt.Errorf("%s: the worker's render and kustomize build give different objects", dir)
		}
		return m, nil
	}

	// The monorepo: each overlay once per tool, interleaved, so that the
	// machine's noise falls on both alike.
	var sCPU, kCPU, sRSS, kRSS, wCPU, wRSS, oCPU, oRSS, hCPU, hRSS, hPriv, kPriv []float64
	var sTot, kTot, wTot, oTot, hTot measurement
	// Warm: the monorepo's renders are one namespace's of one commit,
	// and share the workers sluice-render keeps warm for them.
	monoDomain := sandbox.Domain{Namespace: "bench", Source: "monorepo@1"}
	for i := 0; i < nOverlays; i++ {
		dir := filepath.Join(mono, "overlays", fmt.Sprintf("o%03d", i))
		s, sout, err := once(bin, dir)
		if err != nil {
			return err
		}
		k, kout, err := once(kustomize, dir)
		if err != nil {
			return err
		}
		if err := same(dir, sout, kout); err != nil {
			return err
		}
		w, err := worker(sbSelf, sandbox.Domain{}, mono, fmt.Sprintf("overlays/o%03d", i), kout)
		if err != nil {
			return err
		}
		wCPU, wRSS = append(wCPU, float64(w.cpu)), append(wRSS, float64(w.maxRS))
		wTot.cpu, wTot.wall, wTot.maxRS = wTot.cpu+w.cpu, wTot.wall+w.wall, max(wTot.maxRS, w.maxRS)
		o, err := worker(sbOwn, sandbox.Domain{}, mono, fmt.Sprintf("overlays/o%03d", i), kout)
		if err != nil {
			return err
		}
		oCPU, oRSS = append(oCPU, float64(o.cpu)), append(oRSS, float64(o.maxRS))
		oTot.cpu, oTot.wall, oTot.maxRS = oTot.cpu+o.cpu, oTot.wall+o.wall, max(oTot.maxRS, o.maxRS)
		h, err := worker(sbOwn, monoDomain, mono, fmt.Sprintf("overlays/o%03d", i), kout)
		if err != nil {
			return err
		}
		hCPU, hRSS, hPriv = append(hCPU, float64(h.cpu)), append(hRSS, float64(h.maxRS)), append(hPriv, float64(h.private))
		hTot.cpu, hTot.wall, hTot.maxRS = hTot.cpu+h.cpu, hTot.wall+h.wall, max(hTot.maxRS, h.maxRS)
		kPriv = append(kPriv, float64(k.private))
		sCPU, kCPU = append(sCPU, float64(s.cpu)), append(kCPU, float64(k.cpu))
		sRSS, kRSS = append(sRSS, float64(s.maxRS)), append(kRSS, float64(k.maxRS))
		sTot.cpu, kTot.cpu = sTot.cpu+s.cpu, kTot.cpu+k.cpu
		sTot.wall, kTot.wall = sTot.wall+s.wall, kTot.wall+k.wall
		sTot.maxRS, kTot.maxRS = max(sTot.maxRS, s.maxRS), max(kTot.maxRS, k.maxRS)
	}
	sTot.cpu /= time.Duration(nOverlays)
	kTot.cpu /= time.Duration(nOverlays)
	sTot.wall /= time.Duration(nOverlays)
	kTot.wall /= time.Duration(nOverlays)
	rows = append(rows, row{name: fmt.Sprintf("monorepo: each of %d overlays (mean per overlay; peak RSS the largest)", nOverlays), sluice: sTot, kustom: kTot,
		note: fmt.Sprintf("median CPU %s vs %s, median peak RSS %d vs %d MiB",
			round(time.Duration(medianOf(sCPU))), round(time.Duration(medianOf(kCPU))), int64(medianOf(sRSS))>>10, int64(medianOf(kRSS))>>10)})
	wTot.cpu /= time.Duration(nOverlays)
	wTot.wall /= time.Duration(nOverlays)
	rows = append(rows, row{name: "monorepo, each overlay in a render worker, sluice re-executed (the worker's CPU)", sluice: wTot, kustom: kTot,
		note: fmt.Sprintf("median CPU %s vs %s, median peak RSS %d vs %d MiB",
			round(time.Duration(medianOf(wCPU))), round(time.Duration(medianOf(kCPU))), int64(medianOf(wRSS))>>10, int64(medianOf(kRSS))>>10)})
	oTot.cpu /= time.Duration(nOverlays)
	oTot.wall /= time.Duration(nOverlays)
	rows = append(rows, row{name: "monorepo, each overlay in a new render worker, sluice-render (--render-isolation render)", sluice: oTot, kustom: kTot,
		note: fmt.Sprintf("median CPU %s vs %s, median peak RSS %d vs %d MiB",
			round(time.Duration(medianOf(oCPU))), round(time.Duration(medianOf(kCPU))), int64(medianOf(oRSS))>>10, int64(medianOf(kRSS))>>10)})
	hTot.cpu /= time.Duration(nOverlays)
	hTot.wall /= time.Duration(nOverlays)
	rows = append(rows, row{name: "monorepo, each overlay in a warm render worker of its domain, sluice-render (hydrate's and the controller's renders)", sluice: hTot, kustom: kTot,
		note: fmt.Sprintf("median CPU %s vs %s; peak against peak: median peak RSS %d vs %d MiB, %.2fx (the warm worker's resident set, the binary's pages shared by every worker included); private against private: the worker's anonymous memory at its answer, median %d MiB, vs kustomize's peak anonymous memory (sampled every 2 ms), median %d MiB, %.2fx",
			round(time.Duration(medianOf(hCPU))), round(time.Duration(medianOf(kCPU))), int64(medianOf(hRSS))>>10, int64(medianOf(kRSS))>>10, medianOf(hRSS)/medianOf(kRSS),
			int64(medianOf(hPriv))>>10, int64(medianOf(kPriv))>>10, medianOf(hPriv)/medianOf(kPriv))})

	// The kubeflow-sized tree: n runs each, interleaved; medians.
	var ss, ks []measurement
	var size int
	for i := 0; i < n; i++ {
		s, out, err := once(bin, filepath.Join(kf, "overlays", "example"))
		if err != nil {
			return err
		}
		k, kout, err := once(kustomize, filepath.Join(kf, "overlays", "example"))
		if err != nil {
			return err
		}
		if err := same("the kubeflow-sized overlay", out, kout); err != nil {
			return err
		}
		size = len(kout)
		ss, ks = append(ss, s), append(ks, k)
	}
	objects := countObjects(kustomize, filepath.Join(kf, "overlays", "example"))
	rows = append(rows, row{name: fmt.Sprintf("kubeflow-sized overlay: %d objects, %.1f MB (median of %d)", objects, float64(size)/1e6, n),
		sluice: medianCPU(ss), kustom: medianCPU(ks)})
	var ws, owns []measurement
	kout, _ := exec.Command(kustomize, "build", filepath.Join(kf, "overlays", "example")).Output()
	for i := 0; i < n; i++ {
		w, err := worker(sbSelf, sandbox.Domain{}, kf, "overlays/example", kout)
		if err != nil {
			return err
		}
		o, err := worker(sbOwn, sandbox.Domain{}, kf, "overlays/example", kout)
		if err != nil {
			return err
		}
		ws, owns = append(ws, w), append(owns, o)
	}
	rows = append(rows, row{name: fmt.Sprintf("kubeflow-sized overlay in a render worker, sluice re-executed (median of %d)", n), sluice: medianCPU(ws), kustom: medianCPU(ks)})
	rows = append(rows, row{name: fmt.Sprintf("kubeflow-sized overlay in a render worker, sluice-render (median of %d)", n), sluice: medianCPU(owns), kustom: medianCPU(ks)})

	fmt.Printf("`sluice render` against `kustomize build` (kustomize v5.8.2, built from the module proxy), one process per render; both print the same bytes (checked). CPU is user+system, as the kernel reports it.\n\n")
	fmt.Println("| render | sluice CPU | kustomize CPU | CPU ratio | sluice peak RSS | kustomize peak RSS | RSS ratio | note |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %.2fx | %d MiB | %d MiB | %.2fx | %s |\n", r.name,
			round(r.sluice.cpu), round(r.kustom.cpu), float64(r.sluice.cpu)/float64(r.kustom.cpu),
			r.sluice.maxRS>>10, r.kustom.maxRS>>10, float64(r.sluice.maxRS)/float64(r.kustom.maxRS), r.note)
	}
	fmt.Printf("\nTargets: CPU per overlay ≤ 1.25x kustomize's, peak RSS ≤ 1.5x.\n")

	// A chart for its deployer: its generated values derived from the
	// sync key, against the same render with them at random.
	lines, err := chartRenders(sbOwn, &used, chartRuns)
	if err != nil {
		return err
	}
	fmt.Printf("\nPublic charts (vendored for the tests) rendered in a warm sluice-render worker, as `helm template` renders them (generated values at random) and for a deployer (derived from a sync key); the worker's CPU, summed over %d renders of each, interleaved.\n\n", chartRuns)
	fmt.Println("| chart | as helm template | generated values from the key | added |")
	fmt.Println("|---|---:|---:|---:|")
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Printf("\nTarget: determinism adds ≤ 5%% CPU to a chart's render.\n")
	return nil
}

// kustomizeCLI builds (if need be) and finds the kustomize CLI.
func kustomizeCLI() (string, error) {
	out, err := exec.Command("hack/kustomize/build.sh").Output()
	if err != nil {
		return "", fmt.Errorf("hack/kustomize/build.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func writeFiles(root string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func countObjects(kustomize, dir string) int {
	out, _ := exec.Command(kustomize, "build", dir).Output()
	return bytes.Count(out, []byte("\n---\n")) + 1
}

func medianOf(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// medianCPU is the run of median CPU time.
func medianCPU(ms []measurement) measurement {
	s := append([]measurement(nil), ms...)
	sort.Slice(s, func(i, j int) bool { return s[i].cpu < s[j].cpu })
	return s[len(s)/2]
}
