package calendar_test

import (
	"context"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the host has installed

	"github.com/edge-gateway/edge/behaviour/calendar"
	"github.com/edge-gateway/edge/behaviour/forgive"
	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// TestCalendarWindow fixes each period's boundaries, written out as
// instants: midnight, Monday 00:00 (ISO 8601) and the 1st, in the zone,
// with the 23- and 25-hour days of DST changes.
func TestCalendarWindow(t *testing.T) {
	for _, c := range []struct {
		zone       string
		p          calendar.Period
		now        string
		start, end string
	}{
		{"UTC", calendar.Day, "2024-01-31T23:59:59.999999Z", "2024-01-31T00:00:00Z", "2024-02-01T00:00:00Z"},
		{"UTC", calendar.Day, "2024-02-01T00:00:00Z", "2024-02-01T00:00:00Z", "2024-02-02T00:00:00Z"},
		{"UTC", calendar.Month, "2024-01-31T23:59:59Z", "2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z"},
		{"UTC", calendar.Month, "2024-02-29T12:00:00Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"UTC", calendar.Month, "2023-02-28T23:59:59Z", "2023-02-01T00:00:00Z", "2023-03-01T00:00:00Z"},
		{"UTC", calendar.Month, "2024-12-31T23:59:59Z", "2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z"},
		{"UTC", calendar.Week, "2024-01-07T23:59:59Z", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z"}, // a Sunday
		{"UTC", calendar.Week, "2024-01-08T00:00:00Z", "2024-01-08T00:00:00Z", "2024-01-15T00:00:00Z"}, // a Monday
		{"UTC", calendar.Week, "2025-01-01T10:00:00Z", "2024-12-30T00:00:00Z", "2025-01-06T00:00:00Z"}, // across a year
		// Paris: midnight is 23:00 UTC in winter, 22:00 in summer.
		{"Europe/Paris", calendar.Day, "2024-01-31T23:30:00Z", "2024-01-31T23:00:00Z", "2024-02-01T23:00:00Z"},
		{"Europe/Paris", calendar.Month, "2024-01-31T23:30:00Z", "2024-01-31T23:00:00Z", "2024-02-29T23:00:00Z"},
		{"Europe/Paris", calendar.Day, "2024-03-31T12:00:00Z", "2024-03-30T23:00:00Z", "2024-03-31T22:00:00Z"}, // 23h
		{"Europe/Paris", calendar.Day, "2024-10-27T12:00:00Z", "2024-10-26T22:00:00Z", "2024-10-27T23:00:00Z"}, // 25h
		{"Europe/Paris", calendar.Month, "2024-03-15T00:00:00Z", "2024-02-29T23:00:00Z", "2024-03-31T22:00:00Z"},
		// New York: 2024-03-10 and 2024-11-03.
		{"America/New_York", calendar.Day, "2024-03-10T12:00:00Z", "2024-03-10T05:00:00Z", "2024-03-11T04:00:00Z"},
		{"America/New_York", calendar.Day, "2024-11-03T12:00:00Z", "2024-11-03T04:00:00Z", "2024-11-04T05:00:00Z"},
		{"America/New_York", calendar.Week, "2024-11-03T12:00:00Z", "2024-10-28T04:00:00Z", "2024-11-04T05:00:00Z"},
		// Sunday evening in New York is Monday in UTC: still last week there.
		{"America/New_York", calendar.Week, "2024-01-08T03:00:00Z", "2024-01-01T05:00:00Z", "2024-01-08T05:00:00Z"},
	} {
		loc, err := time.LoadLocation(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		start, end := calendar.Window(rulestest.Time(t, c.now), loc, c.p)
		if !start.Equal(rulestest.Time(t, c.start)) || !end.Equal(rulestest.Time(t, c.end)) {
			t.Errorf("%s %s at %s: got [%s, %s), want [%s, %s)", c.zone, c.p, c.now,
				start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), c.start, c.end)
		}
	}
}

// TestCalendarWindowAllocs: the shape phase computes a window per op.
func TestCalendarWindowAllocs(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	if n := testing.AllocsPerRun(100, func() { calendar.Window(now, loc, calendar.Month) }); n != 0 {
		t.Errorf("Window allocates %v times, want 0", n)
	}
}

// TestCalendarCompileErrors: each misuse is an error at its attribute.
func TestCalendarCompileErrors(t *testing.T) {
	for _, c := range []struct {
		name, attrs string
		line, col   int // of the attribute's value
		want        string
	}{
		{"gcra", `algorithm = "gcra"` + "\n  period = \"month\"", 7, 12, "fixed_window"},
		{"default algorithm", `period = "day"`, 6, 12, "fixed_window"},
		{"sliding_window", `algorithm = "sliding_window"` + "\n  period = \"week\"", 7, 12, "fixed_window"},
		{"bad zone", `algorithm = "fixed_window"` + "\n  period = \"day\"\n  time_zone = \"Europe/Pariss\"", 8, 15, "IANA"},
		{"local zone", `algorithm = "fixed_window"` + "\n  period = \"day\"\n  time_zone = \"Local\"", 8, 15, "IANA"},
		{"zone without calendar", `algorithm = "fixed_window"` + "\n  period = \"24h\"\n  time_zone = \"Europe/Paris\"", 8, 15, "calendar period"},
		{"bad period", `algorithm = "fixed_window"` + "\n  period = \"monthly\"", 7, 12, "duration"},
	} {
		src := "\n\nrule \"quota\" {\n  key = [\"ip\"]\n  limit = 100\n  " + c.attrs + "\n}\n"
		_, diags := builtin.Load("q.hcl", []byte(src))
		if !diags.HasErrors() {
			t.Errorf("%s: no error", c.name)
			continue
		}
		d := diags[0]
		if d.Subject == nil || d.Subject.Start.Line != c.line || d.Subject.Start.Column != c.col || !strings.Contains(d.Detail, c.want) {
			t.Errorf("%s: got %v at %v, want an error at %d:%d mentioning %q", c.name, d, d.Subject, c.line, c.col, c.want)
		}
	}
}

// monthlyRule is a monthly quota in Paris on /api/*: 5 a month per
// client address.
const monthlyRule = `
rule "api-monthly" {
  paths     = ["/api/*"]
  key       = ["ip"]
  algorithm = "fixed_window"
  limit     = 5
  period    = "month"
  time_zone = "Europe/Paris"
}
`

// TestCalendarQuotaLayeredOverBurst: a gcra burst limit and a monthly
// quota in Paris match the same route, each deciding as any two rules
// do: the burst refuses a fast client within the month, the quota refuses
// once the month's allowance is spent whatever the pace, and the 1st of
// the next month (midnight in Paris, 23:00 UTC) brings a fresh quota.
func TestCalendarQuotaLayeredOverBurst(t *testing.T) {
	p := rulestest.Load(t, `
rule "api-burst" {
  paths = ["/api/*"]
  key   = ["ip"]
  limit = 2
  period = "1s"
}
`+monthlyRule)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(4)
	at := func(now time.Time) rules.Decision {
		return e.Check(context.Background(), now, p, get("/api/items", "192.0.2.7"), s)
	}
	monthly := func() rules.Result {
		for _, m := range s.Matches {
			if m.Rule.Name == "api-monthly" {
				return s.Res[m.Op]
			}
		}
		t.Fatal("api-monthly did not match")
		return rules.Result{}
	}
	now := rulestest.Time(t, "2024-01-31T10:00:00Z")
	// Three at once: the burst of 2 refuses the third, which the month
	// does not count (all or nothing).
	for i, want := range []rules.Verdict{rules.Forward, rules.Forward, rules.RefuseLimit} {
		if d := at(now); d.Verdict != want {
			t.Fatalf("request %d: verdict %d, want %d", i, d.Verdict, want)
		}
	}
	if d := at(now); d.Refusing == nil || d.Refusing.Name != "api-burst" {
		t.Fatalf("the burst's refusal came from %v", d.Refusing)
	}
	// Paced under the burst: three more fit the month (5 in all).
	for i := range 3 {
		now = now.Add(time.Hour)
		if d := at(now); d.Verdict != rules.Forward {
			t.Fatalf("paced request %d: verdict %d", i, d.Verdict)
		}
	}
	if got := monthly(); got.Remaining != 0 {
		t.Fatalf("monthly remaining %d, want 0", got.Remaining)
	}
	// At 22:59:59 UTC it is still January in Paris: the quota refuses,
	// for the second left until midnight there.
	now = rulestest.Time(t, "2024-01-31T22:59:59Z")
	d := at(now)
	if d.Verdict != rules.RefuseLimit || d.Refusing == nil || d.Refusing.Name != "api-monthly" {
		t.Fatalf("end of January: verdict %d by %v, want a refusal by api-monthly", d.Verdict, d.Refusing)
	}
	if got := monthly(); got.RetryAfter != time.Second || got.ResetAfter != time.Second {
		t.Errorf("end of January: retry %v, reset %v, want 1s to midnight in Paris", got.RetryAfter, got.ResetAfter)
	}
	// 23:00 UTC is February in Paris: a fresh month, to 1 March 00:00
	// Paris (29 days, 2024 being a leap year).
	now = rulestest.Time(t, "2024-01-31T23:00:00Z")
	if d := at(now); d.Verdict != rules.Forward {
		t.Fatalf("1 February in Paris: verdict %d by %v, want forward", d.Verdict, d.Refusing)
	}
	got := monthly()
	if want := 29 * 24 * time.Hour; got.Remaining != 4 || got.ResetAfter != want {
		t.Errorf("1 February: remaining %d, reset %v, want 4 and %v", got.Remaining, got.ResetAfter, want)
	}
	// The burst still applies within the fresh month.
	at(now)
	if d := at(now); d.Verdict != rules.RefuseLimit || d.Refusing.Name != "api-burst" {
		t.Errorf("burst in February: verdict %d by %v", d.Verdict, d.Refusing)
	}
}

// TestCalendarShapesEveryOp: every op of a calendar rule counts the
// window holding now, whether the request is counted or refused whatever
// the counters say (its op a peek), and so does Forgive's reset; the
// rule's counters live for its longest window and it has no fixed
// RateLimit-Policy item.
func TestCalendarShapesEveryOp(t *testing.T) {
	p := rulestest.Load(t, `
rule "blocked" {
  paths  = ["/api/blocked"]
  action = "deny"
}
`+monthlyRule)
	rec := &rulestest.Recorder{Store: rulestest.NewStore(t)}
	e := rulestest.NewEngine(t, rec)
	now := rulestest.Time(t, "2024-02-10T12:00:00Z")
	start, end := rulestest.Time(t, "2024-01-31T23:00:00Z"), rulestest.Time(t, "2024-02-29T23:00:00Z")
	windowed := func(what string, op rules.Op) {
		t.Helper()
		if !op.Calendar || op.WindowStartUS != start.UnixMicro() || op.PeriodUS != end.Sub(start).Microseconds() {
			t.Errorf("%s: calendar %v, window %d + %dµs, want February in Paris: %d + %dµs", what, op.Calendar, op.WindowStartUS, op.PeriodUS, start.UnixMicro(), end.Sub(start).Microseconds())
		}
	}
	s := rules.NewScratch(4)
	for _, path := range []string{"/api/items", "/api/blocked"} {
		e.Check(context.Background(), now, p, get(path, "192.0.2.7"), s)
		if len(rec.Last()) != 1 {
			t.Fatalf("%s: %d ops in the main call, want 1", path, len(rec.Last()))
		}
		windowed(path, rec.Last()[0])
	}
	r := p.Rules[1]
	if _, err := forgive.Forgive(context.Background(), e, now, p, r, map[string]string{"ip": "192.0.2.7"}, 0); err != nil {
		t.Fatal(err)
	}
	if len(rec.Last()) != 1 || rec.Last()[0].Kind != rules.OpReset {
		t.Fatalf("forgive sent %+v, want one reset", rec.Last())
	}
	windowed("forgive", rec.Last()[0])
	if c := calendar.Of(r); c == nil || c.Period != calendar.Month || c.Zone.String() != "Europe/Paris" || r.Period != 31*24*time.Hour {
		t.Errorf("stage %+v, period %v: want a month in Europe/Paris, nominally 31 days", c, r.Period)
	}
	if got, want := p.LongestKeyLifetime(), 31*24*time.Hour+time.Hour; got != want {
		t.Errorf("LongestKeyLifetime %v, want %v (31 days and an hour)", got, want)
	}
}
