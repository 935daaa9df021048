//go:build !linux

package devcluster

import "os/exec"

// DieWithParent does nothing where the kernel has no parent-death signal:
// servers outlive a test binary killed at its timeout there.
func DieWithParent(cmd *exec.Cmd) {}

// startReaper does nothing: see DieWithParent.
func startReaper(dir string) (stop func()) { return func() {} }
