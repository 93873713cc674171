//go:build !race

package botscore

import "testing"

// The race detector's sync.Pool drops entries at random, so regexp's
// machine cache allocates under -race; the guard runs without it.
func TestReadRequestAllocatesNothing(t *testing.T) {
	matcher()
	for _, src := range []*rawSource{
		chromeNavigation(chromeUA, true), firefoxNavigation(firefoxUA), safariNavigation(safariUA),
		source("Host: example.com", "User-Agent: Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)"),
		source("Host: example.com", "User-Agent: curl/8.5.0", "Accept: */*"),
	} {
		var sig RequestSignals
		if n := testing.AllocsPerRun(100, func() { ReadRequest(src, &sig) }); n != 0 {
			t.Errorf("ReadRequest(%q) allocates %v times, want 0", src.ua, n)
		}
	}
}
