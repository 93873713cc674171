package nat

import (
	"testing"

	"github.com/edge-gateway/edge/internal/testheader"
)

// TestCanonicalHeaderNames: the name OnForward sets with
// SetCanonical is in the form fasthttp normalises it to (testheader.Canonical).
func TestCanonicalHeaderNames(t *testing.T) {
	testheader.Canonical(t, hdrXEdgeVisitor)
}
