//go:build !linux

package differential

import "os/exec"

// ownProcessGroup leaves cmd as it is: the origins' stacks are Debian's
// packages, and a process group of its own is a Linux refinement.
func ownProcessGroup(cmd *exec.Cmd) {}

// killOrigin kills the origin's process.
func killOrigin(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
}
