//go:build !unix

package main

import (
	"errors"
	"os"
)

// upgradeSignals is empty: binary upgrades pass descriptors by number,
// which needs a Unix.
var upgradeSignals []os.Signal

func forkExec(string, []string, []string, []uintptr) (int, error) {
	return 0, errors.New("binary upgrades need a Unix")
}
