//go:build unix

package main

import (
	"os"
	"syscall"
)

// upgradeSignals start a binary upgrade (docs/deploying.md, "Graceful
// restarts and binary upgrades"): SIGUSR2, as NGINX and Unicorn use it.
var upgradeSignals = []os.Signal{syscall.SIGUSR2}

// forkExec starts exe with argv and env, its descriptors 0, 1, 2, ... being
// files, and returns its PID.
func forkExec(exe string, argv, env []string, files []uintptr) (int, error) {
	return syscall.ForkExec(exe, argv, &syscall.ProcAttr{Env: env, Files: files})
}
