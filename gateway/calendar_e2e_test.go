package gateway

import (
	"net/http"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the host has installed

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/rulestest"
)

// calendarPolicy layers a monthly quota in Paris over a burst limit on one
// route, and puts a daily quota in New York on another.
const calendarPolicy = `
edge {
  upstream         = "http://127.0.0.1:1"
  trusted_proxies  = ["127.0.0.1/32", "::1/128"]
  forwarded_header = "x-forwarded-for"
}
rule "q-burst" {
  paths  = ["/q/*"]
  key    = ["ip"]
  limit  = 2
  period = "1s"
}
rule "q-monthly" {
  paths     = ["/q/*"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 4
  period    = "month"
  time_zone = "Europe/Paris"
}
rule "d-daily" {
  paths     = ["/d/*"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 2
  period    = "day"
  time_zone = "America/New_York"
}
`

// TestCalendarQuotaThroughTheServer: on the memory store and on Redis (the
// caller's clock, injected), a monthly quota in Paris counts to midnight
// there on the last day of January (23:00 UTC): RateLimit's t is the
// seconds to that boundary and a refusal's Retry-After too, RateLimit-
// Policy's w is the month's own length (31 days, then 29 for February
// 2024), and at the boundary a fresh quota starts while the burst rule on
// the same route still paces the client. A daily quota in New York on the
// day DST starts lasts 23 hours.
func TestCalendarQuotaThroughTheServer(t *testing.T) {
	for storeName, newStore := range headerStores(t) {
		t.Run(storeName, func(t *testing.T) {
			n := startHeaderNode(t, calendarPolicy, newStore(t), "")
			const client = "198.51.100.40"
			n.clock.Set(rulestest.Time(t, "2024-01-31T22:59:50Z")) // 23:59:50 in Paris
			for i := range 4 {
				r := n.get(t, "/q/a", client)
				m := r.limit["q-monthly"]
				if r.status != http.StatusOK || m["r"] != int64(3-i) || m["t"] != int64(10-i) {
					t.Fatalf("request %d at 23:59:%d Paris: %d, q-monthly %v; want 200 with r=%d t=%d", i, 50+i, r.status, m, 3-i, 10-i)
				}
				if p := r.policy["q-monthly"]; p["q"] != 4 || p["w"] != 31*86400 {
					t.Fatalf("January's RateLimit-Policy %v, want q=4 w=%d", p, 31*86400)
				}
				n.clock.Advance(time.Second)
			}
			// The quota is spent: refused until midnight in Paris, 6 s away.
			r := n.get(t, "/q/a", client)
			if r.status != http.StatusTooManyRequests || r.retryAfter != 6 || r.limit["q-monthly"]["r"] != 0 || r.limit["q-monthly"]["t"] != 6 {
				t.Fatalf("the 5th in January: %d, Retry-After %d, q-monthly %v; want 429 with 6 (to midnight in Paris)", r.status, r.retryAfter, r.limit["q-monthly"])
			}
			n.clock.Set(rulestest.Time(t, "2024-01-31T22:59:59.5Z"))
			if r := n.get(t, "/q/a", client); r.status != http.StatusTooManyRequests || r.retryAfter != 1 {
				t.Fatalf("half a second before midnight in Paris: %d, Retry-After %d; want 429 with 1", r.status, r.retryAfter)
			}
			// 23:00 UTC: February in Paris, a fresh quota to 1 March.
			n.clock.Set(rulestest.Time(t, "2024-01-31T23:00:00Z"))
			feb := int64(29 * 86400)
			r = n.get(t, "/q/a", client)
			if m := r.limit["q-monthly"]; r.status != http.StatusOK || m["r"] != 3 || m["t"] != feb {
				t.Fatalf("1 February 00:00 Paris: %d, q-monthly %v; want 200 with r=3 t=%d", r.status, m, feb)
			}
			if p := r.policy["q-monthly"]; p["w"] != feb {
				t.Errorf("February's w=%d, want %d (the window's own length)", p["w"], feb)
			}
			// Layered: the burst (2 a second) refuses the third at once,
			// and the refused request does not count against the month.
			if r := n.get(t, "/q/a", client); r.status != http.StatusOK || r.limit["q-monthly"]["r"] != 2 {
				t.Fatalf("second in February: %d, q-monthly %v", r.status, r.limit["q-monthly"])
			}
			r = n.get(t, "/q/a", client)
			if r.status != http.StatusTooManyRequests || r.retryAfter != 1 || r.limit["q-burst"]["r"] != 0 || r.limit["q-monthly"]["r"] != 2 {
				t.Fatalf("third at once: %d, Retry-After %d, %v; want 429 by q-burst, the month's r still 2", r.status, r.retryAfter, r.limit)
			}
			n.clock.Advance(time.Second)
			if r := n.get(t, "/q/a", client); r.status != http.StatusOK || r.limit["q-monthly"]["r"] != 1 {
				t.Fatalf("a second later: %d, q-monthly %v; want 200 with r=1", r.status, r.limit["q-monthly"])
			}

			// New York, 10 March 2024: midnight EST (05:00 UTC) to
			// midnight EDT (04:00 UTC next day), 23 hours.
			n.clock.Set(rulestest.Time(t, "2024-03-10T05:00:00Z"))
			r = n.get(t, "/d/x", client)
			if m := r.limit["d-daily"]; r.status != http.StatusOK || m["r"] != 1 || m["t"] != 23*3600 || r.policy["d-daily"]["w"] != 23*3600 {
				t.Fatalf("New York's DST day: %d, d-daily %v, policy %v; want t=w=%d", r.status, m, r.policy["d-daily"], 23*3600)
			}
			n.clock.Set(rulestest.Time(t, "2024-03-11T03:59:59Z")) // 23:59:59 EDT
			if r := n.get(t, "/d/x", client); r.status != http.StatusOK || r.limit["d-daily"]["t"] != 1 {
				t.Fatalf("the day's last second: %d, d-daily %v; want 200 with t=1", r.status, r.limit["d-daily"])
			}
			if r := n.get(t, "/d/x", client); r.status != http.StatusTooManyRequests || r.retryAfter != 1 {
				t.Fatalf("third that day: %d, Retry-After %d; want 429 with 1", r.status, r.retryAfter)
			}
			n.clock.Set(rulestest.Time(t, "2024-03-11T04:00:00Z"))
			if r := n.get(t, "/d/x", client); r.status != http.StatusOK || r.limit["d-daily"]["r"] != 1 || r.policy["d-daily"]["w"] != 86400 {
				t.Fatalf("11 March 00:00 EDT: %d, d-daily %v, policy %v; want a fresh 24-hour day", r.status, r.limit["d-daily"], r.policy["d-daily"])
			}
		})
	}
}

// TestAdminRulesPeriodText: GET /admin/rules shows a calendar period by
// name with its zone, not as its nominal duration.
func TestAdminRulesPeriodText(t *testing.T) {
	p, diags := builtin.Load("calendar.hcl", []byte(calendarPolicy))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := map[string]string{"q-burst": "1s", "q-monthly": "month Europe/Paris", "d-daily": "day America/New_York"}
	for _, r := range p.Rules {
		if got := periodText(r); got != want[r.Name] {
			t.Errorf("%s: period %q, want %q", r.Name, got, want[r.Name])
		}
	}
}
