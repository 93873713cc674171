package differential

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a process group of its own, which
// killOrigin kills whole, and has Linux kill it when the test binary dies
// (a panic or a timeout runs no cleanup): an origin never outlives its
// test.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killOrigin kills the process group ownProcessGroup made.
func killOrigin(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
