package main

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"sluice.dev/sluice/internal/testenv"
)

func mainTakeover() {
	size := flag.Int("size", 8<<20, "bytes of each image's binary")
	mbps := flag.Int("mbps", 100, "the registry link's upload bandwidth for rows (c') and (d'), in Mbit/s")
	flag.Parse()
	linkMbps = *mbps
	tb := newTB()
	defer tb.cleanup()
	if err := runTakeover(tb, *size); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

const nServices, nEnvs = 10, 3

// linkMbps is the emulated registry link of the throttled rows.
var linkMbps int

// platformRepo is a code repository with 10 services (a binary each, of
// size random bytes, and a kustomize base) deployed to 3 environments:
// 10 Images and 30 ManifestSyncs under deploy/sluice.
func platformRepo(reg, code, deploy string, size int) map[string]string {
	files := map[string]string{}
	envs := []string{"dev", "staging", "qa"}
	var syncs, images strings.Builder
	for i := 0; i < nServices; i++ {
		svc := fmt.Sprintf("svc-%d", i)
		files["bin/"+svc] = randomData(int64(i), size)
		files["deploy/base/"+svc+"/kustomization.yaml"] = "resources: [deployment.yaml]\n"
		files["deploy/base/"+svc+"/deployment.yaml"] = fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %[1]s}\nspec:\n  selector: {matchLabels: {app: %[1]s}}\n  template:\n    metadata: {labels: {app: %[1]s}}\n    spec: {containers: [{name: app, image: %[2]s/team/%[1]s}]}\n", svc, reg)
		fmt.Fprintf(&images, "---\napiVersion: sluice.dev/v1alpha1\nkind: Image\nmetadata: {name: %[1]s}\nspec:\n  image: %[2]s/team/%[1]s\n  base: %[2]s/base/static:latest\n  source: [{repo: %[3]s, ref: main, mappings: [{src: bin/%[1]s, dest: /app/%[1]s}]}]\n  config: {entrypoint: [/app/%[1]s]}\n", svc, reg, code)
		for _, env := range envs[:nEnvs] {
			files["deploy/overlays/"+env+"/"+svc+"/kustomization.yaml"] = "namespace: " + env + "\nresources: [../../../base/" + svc + "]\n"
			fmt.Fprintf(&syncs, "---\napiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: %[1]s-%[2]s}\nspec:\n  source: {repo: %[3]s, ref: main, path: deploy/overlays/%[2]s/%[1]s}\n  images: [{name: %[4]s/team/*, strategy: sourceCommit}]\n  destination: {repo: %[5]s, branch: env/%[2]s, path: apps/%[1]s}\n", svc, env, code, reg, deploy)
		}
	}
	files["deploy/sluice/syncs.yaml"] = syncs.String()
	files["deploy/sluice/images.yaml"] = images.String()
	return files
}

func randomData(seed int64, n int) string {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return string(b)
}

func runTakeover(tb *benchTB, size int) error {
	work := tb.TempDir()
	bin, _, err := tools(work)
	if err != nil {
		return err
	}
	git, reg := testenv.NewGitServer(tb), testenv.NewRegistry(tb)
	base, _ := random.Image(1<<20, 2)
	reg.PushImage(tb, "base/static:latest", base)
	codeURL, deployURL := git.CreateRepo(tb, "code"), git.CreateRepo(tb, "deploy")
	d := testenv.NewWork(tb, deployURL)
	d.Write(map[string]string{"README.md": "deploy\n"}).Commit("init")
	d.Push("main")
	code := testenv.NewWork(tb, codeURL)
	code.Write(platformRepo(reg.Host, codeURL, deployURL, size)).Commit("platform")
	code.Push("main")
	rc := filepath.Join(work, "rc.yaml")
	os.WriteFile(rc, []byte("apiVersion: sluice.dev/v1alpha1\nkind: RepoConfig\nmetadata: {name: platform}\nspec:\n  repo: "+codeURL+"\n  ref: main\n  globs: [\"deploy/sluice/*.yaml\"]\n"), 0o644)
	cache := "--cache-dir=" + filepath.Join(work, "cache")

	type row struct {
		name           string
		m              measurement
		uploads, bytes int64
		note           string
	}
	var rows []row
	step := func(name, note string, args ...string) (row, error) {
		u, b := reg.Uploads.Load(), reg.UploadedBytes.Load()
		m, out, err := timed(name, bin, args...)
		if err != nil {
			return row{}, fmt.Errorf("%s: %w\n%s", name, err, tail(out))
		}
		r := row{name: name, m: m, uploads: reg.Uploads.Load() - u, bytes: reg.UploadedBytes.Load() - b, note: note}
		rows = append(rows, r)
		return r, nil
	}
	if _, err := step("(a) sluice apply -f: first reconcile, 10 images built, 30 syncs", "what rebuilding every image on every commit costs", "apply", "-f", rc, cache); err != nil {
		return err
	}
	unchanged, err := step("(b) sluice build -f: all 10, nothing changed", "each image found by its inputs hash and only tagged", "build", "-f", rc, cache)
	if err != nil {
		return err
	}
	// A developer changes one service's binary, uncommitted, and takes the
	// environments over with that one image rebuilt; three times, with new
	// content each time, the median reported. (d) makes and pushes the same
	// layer alone.
	if p := os.Getenv("BENCH_PROFILE"); p != "" {
		os.Setenv("SLUICE_CPUPROFILE", p)
	}
	if p := os.Getenv("BENCH_TRACE"); p != "" {
		os.Setenv("SLUICE_TRACE", p)
	}
	oneImage := func(label, note string, seed int64) (row, row, error) {
		var cs, ds []measurement
		tk := row{name: "(c" + label + ") sluice takeover --local --build svc-3: one image, 30 syncs", note: note}
		for i := 0; i < 3; i++ {
			changed := randomData(seed+int64(i), size)
			code.Write(map[string]string{"bin/svc-3": changed})
			u, b := reg.Uploads.Load(), reg.UploadedBytes.Load()
			m, out, err := timed("", bin, "takeover", "-f", rc, cache, "--local", code.Dir, "--build", "svc-3", "--tag", "dev-bench")
			if err != nil {
				return tk, row{}, fmt.Errorf("takeover: %w\n%s", err, tail(out))
			}
			tk.uploads, tk.bytes = reg.Uploads.Load()-u, reg.UploadedBytes.Load()-b
			cs = append(cs, m)
			os.Unsetenv("SLUICE_CPUPROFILE")
			os.Unsetenv("SLUICE_TRACE")
			start := time.Now()
			if err := pushLayer(reg.Host+"/floor/layer", "app/svc-3", changed); err != nil {
				return tk, row{}, err
			}
			ds = append(ds, measurement{wall: time.Since(start)})
		}
		tk.m = median(cs)
		ly := row{name: "(d" + label + ") that one layer alone: tar, gzip, digest, upload", m: median(ds), uploads: 1, bytes: int64(size), note: "in process, no start-up: the floor of (c" + label + ")"}
		return tk, ly, nil
	}
	takeover, layer, err := oneImage("", "svc-3 built and pushed, 9 images only tagged, 30 folders committed; loopback", 100)
	if err != nil {
		return err
	}
	reg.Throttle(int64(linkMbps) * 1_000_000 / 8)
	takeoverNet, layerNet, err := oneImage("'", fmt.Sprintf("the same, the registry reached at %d Mbit/s", linkMbps), 200)
	if err != nil {
		return err
	}
	reg.Throttle(0)
	rows = append(rows, takeover, layer, takeoverNet, layerNet)

	fmt.Printf("A RepoConfig finding 10 Images (a %d MiB binary each, on a base image) and 30 ManifestSyncs (10 services in 3 environments); git server and registry on loopback.\n\n", size>>20)
	fmt.Println("| run | wall | blob uploads | bytes uploaded | note |")
	fmt.Println("|---|---:|---:|---:|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %d | %.1f MiB | %s |\n", r.name, round(r.m.wall), r.uploads, float64(r.bytes)/(1<<20), r.note)
	}
	fmt.Printf("\nTargets: (b) makes no layer upload (%d uploads) and finishes under 2 s (%s); (c) is dominated by the one image's layer: (d) is %.0f%% of (c) on loopback, (d') %.0f%% of (c') at %d Mbit/s; (c) uploaded %.1f MiB for a %.1f MiB layer.\n",
		unchanged.uploads, round(unchanged.m.wall), 100*float64(layer.m.wall)/float64(takeover.m.wall), 100*float64(layerNet.m.wall)/float64(takeoverNet.m.wall), linkMbps, float64(takeover.bytes)/(1<<20), float64(size)/(1<<20))
	return nil
}

// pushLayer makes one file a gzip layer, as the builder does, and uploads
// it.
func pushLayer(repo, path, data string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: path, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg})
	io.WriteString(tw, data)
	tw.Close()
	raw := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }, tarball.WithCompressedCaching)
	if err != nil {
		return err
	}
	r, err := name.NewRepository(repo, name.Insecure)
	if err != nil {
		return err
	}
	return remote.WriteLayer(r, l, remote.WithContext(context.Background()))
}
