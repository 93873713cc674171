package botscore

import (
	"testing"

	"github.com/edge-gateway/edge/internal/testheader"
)

// TestCanonicalHeaderNames: the names OnForward sets with
// SetCanonical are in the form fasthttp normalises them to (testheader.Canonical).
func TestCanonicalHeaderNames(t *testing.T) {
	testheader.Canonical(t, hdrXEdgeBotScore, hdrXEdgeBotReasons)
}
