package gateway

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// desktopChrome is a desktop Chrome's User-Agent.
const desktopChrome = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"

// TestRealBrowserBotScore is issue 12's real-browser check, through the
// real server on bots.hcl: headless Chromium with its User-Agent set to a
// desktop Chrome's scores 30 or more (its headers are a real browser's, in
// a real browser's order and case), while the same Chromium unmodified
// (HeadlessChrome in its User-Agent) scores under 30. The score is read
// where the origin reads it: X-Edge-Bot-Score on the request it got.
func TestRealBrowserBotScore(t *testing.T) {
	chromium := chromiumPath(t)
	n := startNode(t, loadPolicy(t, botsFixture), nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}})
	for _, tt := range []struct {
		name      string
		userAgent string // "" leaves Chromium's own
		high      bool   // want 30 or more
	}{
		{"desktop Chrome user agent", desktopChrome, true},
		{"unmodified headless Chromium", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A hang guard, far above what starting Chromium takes.
			ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
			defer cancel()
			var out lockedBuffer
			opts := chromiumOptions(chromium, &out)
			if tt.userAgent != "" {
				opts = append(opts, chromedp.UserAgent(tt.userAgent))
			}
			allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
			defer cancelAlloc()
			browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
			defer cancelBrowser()
			if _, err := chromedp.RunResponse(browserCtx, chromedp.Navigate("http://"+n.addr+"/trace/page")); err != nil {
				t.Fatalf("navigating: %v\n%s", err, out.String())
			}
			last := n.last(t)
			score, err := strconv.Atoi(last.Headers["X-Edge-Bot-Score"])
			if err != nil {
				t.Fatalf("the origin got X-Edge-Bot-Score %q: %v", last.Headers["X-Edge-Bot-Score"], err)
			}
			t.Logf("User-Agent %q: score %d, reasons %q", last.Headers["User-Agent"], score, last.Headers["X-Edge-Bot-Reasons"])
			if tt.high && score < 30 {
				t.Errorf("score %d (reasons %q), want 30 or more", score, last.Headers["X-Edge-Bot-Reasons"])
			}
			if !tt.high && score >= 30 {
				t.Errorf("score %d (reasons %q), want under 30", score, last.Headers["X-Edge-Bot-Reasons"])
			}
		})
	}
}
