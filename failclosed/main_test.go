package failclosed

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: the
// background prober and the local store's sweeper must stop on Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
