package gateway

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

const botsFixture = "testdata/fixtures/policies/bots.hcl"

// browserHeaders are a desktop Chrome's navigation headers, in its order.
var browserHeaders = []string{
	"User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
	"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
	"Accept-Encoding", "gzip, deflate, br",
	"Accept-Language", "en-US,en;q=0.9",
}

// TestBotScoreThroughTheServer: on bots.hcl, signup-bots (one signup an
// hour when bot_score_below = 30) refuses a second signup from
// python-requests, while a browser-like client from another address of the
// same network signs up again and again; every forwarded request carries
// X-Edge-Bot-Score and X-Edge-Bot-Reasons, and a client's own copies never
// reach the origin.
func TestBotScoreThroughTheServer(t *testing.T) {
	n := startNode(t, loadPolicy(t, botsFixture), nodeOptions{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}})
	signup := func(client string, header ...string) int {
		t.Helper()
		return do(t, "POST", "http://"+n.addr+"/signup", "", append([]string{"X-Forwarded-For", client}, header...)...).status
	}
	py := []string{"User-Agent", "python-requests/2.31.0", "Accept-Encoding", "gzip, deflate", "Accept", "*/*"}
	if got := signup("198.51.100.7", py...); got != http.StatusOK {
		t.Fatalf("python-requests' first signup: got %d, want 200", got)
	}
	last := n.last(t)
	score, err := strconv.Atoi(last.Headers["X-Edge-Bot-Score"])
	if err != nil || score >= 30 {
		t.Errorf("python-requests reached the origin with X-Edge-Bot-Score %q, want a score under 30", last.Headers["X-Edge-Bot-Score"])
	}
	if last.Headers["X-Edge-Bot-Reasons"] == "" {
		t.Errorf("no X-Edge-Bot-Reasons for python-requests")
	}
	if got := signup("198.51.100.7", py...); got != http.StatusTooManyRequests {
		t.Errorf("python-requests' second signup: got %d, want 429 (signup-bots)", got)
	}
	for i := range 3 {
		if got := signup("198.51.100.8", browserHeaders...); got != http.StatusOK {
			t.Fatalf("the browser's signup %d: got %d, want 200", i+1, got)
		}
	}
	last = n.last(t)
	if score, err := strconv.Atoi(last.Headers["X-Edge-Bot-Score"]); err != nil || score < 30 {
		t.Errorf("the browser reached the origin with X-Edge-Bot-Score %q, want 30 or more", last.Headers["X-Edge-Bot-Score"])
	}
	// A spoofed score, in every spelling, never reaches the origin.
	do(t, "GET", "http://"+n.addr+"/api/items", "", append([]string{"X-Forwarded-For", "198.51.100.9",
		"X-Edge-Bot-Score", "99", "X_Edge_Bot_Score", "99", "x-edge-bot-reasons", "none"}, py...)...)
	last = n.last(t)
	if got := last.Headers["X-Edge-Bot-Score"]; got == "99" || got == "" {
		t.Errorf("origin got X-Edge-Bot-Score %q, want the edge's own score", got)
	}
	for name := range last.Headers {
		if name == "X_edge_bot_score" || name == "X_Edge_Bot_Score" {
			t.Errorf("a client's %s reached the origin", name)
		}
	}
	if got := last.Headers["X-Edge-Bot-Reasons"]; got == "none" {
		t.Errorf("the client's X-Edge-Bot-Reasons reached the origin")
	}
}
