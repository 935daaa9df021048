//go:build linux

package devcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process that dies without stopping its cluster (a test binary
// panicking at its timeout runs no cleanup) leaves none of it running:
// etcd, the API server and kube-controller-manager go with it, rather than
// loading the machine for whatever runs next.
func TestAClusterDiesWithTheProcessThatStartedIt(t *testing.T) {
	if os.Getenv("SLUICE_TEST_ORPHAN_CHILD") != "" {
		if _, err := Start(context.Background(), Options{WithoutCRDs: true}); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("started")
		select {} // until killed
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAClusterDiesWithTheProcessThatStartedIt$")
	cmd.Env = append(os.Environ(), "SLUICE_TEST_ORPHAN_CHILD=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	for started := false; !started; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the process starting the cluster exited before it started")
			}
			if strings.HasPrefix(l, "error:") {
				t.Fatal(l)
			}
			started = l == "started"
		case <-time.After(2 * time.Minute):
			t.Fatal("the cluster did not start in 2 minutes")
		}
	}
	kids := childrenOf(t, cmd.Process.Pid)
	t.Cleanup(func() {
		for pid := range kids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	var names []string
	for _, name := range kids {
		names = append(names, name)
	}
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller"} {
		if !slices.Contains(names, want) {
			t.Fatalf("the cluster's processes are %v: no %s, the test shows nothing", names, want)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var alive []string
		for pid, name := range kids {
			if running(pid, name) {
				alive = append(alive, fmt.Sprintf("%s (%d)", name, pid))
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(alive)
			t.Fatalf("15 s after the process that started them was killed, still running: %s", strings.Join(alive, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// childrenOf names the processes whose parent is pid, by their pid (the
// reaper, which outlives its parent by design, left out).
func childrenOf(t *testing.T, pid int) map[int]string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := strings.LastIndexByte(string(stat), ')')
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		name := strings.TrimSpace(string(stat[strings.IndexByte(string(stat), '(')+1 : i]))
		if name == "sh" {
			continue // the reaper
		}
		out[child] = name
	}
	return out
}

// running reports whether the process pid still runs under its name (not
// a zombie, not another process given its pid since).
func running(pid int, name string) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	fields := strings.Fields(string(stat[i+1:]))
	return len(fields) > 0 && fields[0] != "Z" && strings.Contains(string(stat[:i]), "("+name)
}
