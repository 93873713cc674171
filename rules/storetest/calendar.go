package storetest

import (
	"fmt"
	"time"
	_ "time/tzdata" // the tables' zones, whatever the host has installed

	"github.com/edge-gateway/edge/behaviour/calendar"
	"github.com/edge-gateway/edge/rules"
)

// Calendar windows (behaviour/calendar): a fixed_window op whose window the
// caller computed in a time zone (rules.Op.Calendar, WindowStartUS, a
// PeriodUS of that window's length), as the Engine builds it from its
// clock. The tables fix, on every store, that a calendar window is a count
// of its own from its boundary (midnight, Monday 00:00, the 1st) to the
// next, that a full window refuses until exactly that boundary, and that a
// day across a DST change is 23 or 25 hours long. Each step's expected
// window end is written out as an instant, not derived from
// calendar.Window, so the tables check that too.

// calStep is one take of a calendar table: at (RFC 3339, with the zone's
// offset at that instant), the result, and end, the window's end the
// result counts to. window, when set, is the instant the op's window is
// computed at instead of at (a caller whose clock differs from the
// store's).
type calStep struct {
	at        string
	allowed   bool
	remaining int64
	end       string
	window    string
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic("storetest: " + err.Error())
	}
	return t
}

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic("storetest: " + err.Error())
	}
	return loc
}

// CalendarOp returns the take the Engine makes at now for a fixed_window
// rule of limit per calendar period p in loc.
func CalendarOp(key rules.Key, loc *time.Location, p calendar.Period, limit int64, now time.Time) rules.Op {
	start, end := calendar.Window(now, loc, p)
	return rules.Op{
		Kind: rules.OpTake, Algorithm: rules.FixedWindow, Key: key, Limit: limit, Burst: limit,
		PeriodUS: end.UnixMicro() - start.UnixMicro(), Cost: 1, Enforce: true,
		Calendar: true, WindowStartUS: start.UnixMicro(),
	}
}

func calendarCase(name, zone string, p calendar.Period, limit int64, ss []calStep) Case {
	loc := mustZone(zone)
	c := Case{Name: "calendar/" + name}
	for _, s := range ss {
		at := mustTime(s.at)
		win := at
		if s.window != "" {
			win = mustTime(s.window)
		}
		left := mustTime(s.end).Sub(at)
		r := rules.Result{Allowed: true, Remaining: s.remaining, ResetAfter: left}
		if !s.allowed {
			r = rules.Result{ResetAfter: left, RetryAfter: left}
		}
		c.Steps = append(c.Steps, Step{At: at.Sub(Base), Ops: ops(CalendarOp(Key("cal"), loc, p, limit, win)), Want: want(r)})
	}
	return c
}

func calendarCases() []Case {
	day, week, month := calendar.Day, calendar.Week, calendar.Month
	cs := []Case{
		// The 31st's last second, then February's first: a new count, to
		// the 1st of March (29 days: 2024 is a leap year).
		calendarCase("month_utc_jan31_feb1", "UTC", month, 2, []calStep{
			{at: "2024-01-31T23:59:58Z", allowed: true, remaining: 1, end: "2024-02-01T00:00:00Z"},
			{at: "2024-01-31T23:59:59Z", allowed: true, remaining: 0, end: "2024-02-01T00:00:00Z"},
			{at: "2024-01-31T23:59:59.999999Z", end: "2024-02-01T00:00:00Z"},
			{at: "2024-02-01T00:00:00Z", allowed: true, remaining: 1, end: "2024-03-01T00:00:00Z"},
			{at: "2024-02-29T23:59:59Z", allowed: true, remaining: 0, end: "2024-03-01T00:00:00Z"},
			{at: "2024-03-01T00:00:00Z", allowed: true, remaining: 1, end: "2024-04-01T00:00:00Z"},
		}),
		// A leap February in Paris: the 29th is still February's window;
		// March starts at midnight local (23:00 UTC) and is 31 days less
		// the hour of its last Sunday.
		calendarCase("month_paris_feb29_mar1", "Europe/Paris", month, 1, []calStep{
			{at: "2024-02-28T12:00:00+01:00", allowed: true, remaining: 0, end: "2024-03-01T00:00:00+01:00"},
			{at: "2024-02-29T23:59:59+01:00", end: "2024-03-01T00:00:00+01:00"},
			{at: "2024-03-01T00:00:00+01:00", allowed: true, remaining: 0, end: "2024-04-01T00:00:00+02:00"},
			{at: "2024-03-31T23:59:59+02:00", end: "2024-04-01T00:00:00+02:00"},
		}),
		// A common year: February's last day is the 28th.
		calendarCase("month_utc_feb28_mar1_2025", "UTC", month, 1, []calStep{
			{at: "2025-02-01T00:00:00Z", allowed: true, remaining: 0, end: "2025-03-01T00:00:00Z"},
			{at: "2025-02-28T23:59:59Z", end: "2025-03-01T00:00:00Z"},
			{at: "2025-03-01T00:00:00Z", allowed: true, remaining: 0, end: "2025-04-01T00:00:00Z"},
		}),
		// Paris, last Sunday of March: 02:00 becomes 03:00, the day is 23
		// hours, midnight to midnight local.
		calendarCase("day_paris_dst_march", "Europe/Paris", day, 2, []calStep{
			{at: "2024-03-30T23:59:59+01:00", allowed: true, remaining: 1, end: "2024-03-31T00:00:00+01:00"},
			{at: "2024-03-31T00:30:00+01:00", allowed: true, remaining: 1, end: "2024-04-01T00:00:00+02:00"},
			{at: "2024-03-31T03:30:00+02:00", allowed: true, remaining: 0, end: "2024-04-01T00:00:00+02:00"},
			{at: "2024-03-31T23:59:59+02:00", end: "2024-04-01T00:00:00+02:00"},
			{at: "2024-04-01T00:00:00+02:00", allowed: true, remaining: 1, end: "2024-04-02T00:00:00+02:00"},
		}),
		// Paris, last Sunday of October: 03:00 becomes 02:00, the day is 25
		// hours; 02:30 comes twice, an hour apart, in the same window.
		calendarCase("day_paris_dst_october", "Europe/Paris", day, 2, []calStep{
			{at: "2024-10-27T00:00:00+02:00", allowed: true, remaining: 1, end: "2024-10-28T00:00:00+01:00"},
			{at: "2024-10-27T02:30:00+02:00", allowed: true, remaining: 0, end: "2024-10-28T00:00:00+01:00"},
			{at: "2024-10-27T02:30:00+01:00", end: "2024-10-28T00:00:00+01:00"},
			{at: "2024-10-27T23:59:59+01:00", end: "2024-10-28T00:00:00+01:00"},
			{at: "2024-10-28T00:00:00+01:00", allowed: true, remaining: 1, end: "2024-10-29T00:00:00+01:00"},
		}),
		// New York, second Sunday of March: a 23-hour day, refused to its
		// last microsecond.
		calendarCase("day_new_york_dst_march", "America/New_York", day, 1, []calStep{
			{at: "2024-03-10T00:00:00-05:00", allowed: true, remaining: 0, end: "2024-03-11T00:00:00-04:00"},
			{at: "2024-03-10T23:59:59.999999-04:00", end: "2024-03-11T00:00:00-04:00"},
			{at: "2024-03-11T00:00:00-04:00", allowed: true, remaining: 0, end: "2024-03-12T00:00:00-04:00"},
		}),
		// New York, a week holding the first Sunday of November: Monday
		// 00:00 EDT to Monday 00:00 EST, 7 days and 1 hour.
		calendarCase("week_new_york_dst_november", "America/New_York", week, 2, []calStep{
			{at: "2024-10-27T23:59:59-04:00", allowed: true, remaining: 1, end: "2024-10-28T00:00:00-04:00"},
			{at: "2024-10-28T00:00:00-04:00", allowed: true, remaining: 1, end: "2024-11-04T00:00:00-05:00"},
			{at: "2024-11-03T01:30:00-04:00", allowed: true, remaining: 0, end: "2024-11-04T00:00:00-05:00"},
			{at: "2024-11-03T01:30:00-05:00", end: "2024-11-04T00:00:00-05:00"},
			{at: "2024-11-04T00:00:00-05:00", allowed: true, remaining: 1, end: "2024-11-11T00:00:00-05:00"},
		}),
		// ISO weeks start on Monday: Sunday's last second is the old week.
		calendarCase("week_utc_monday", "UTC", week, 1, []calStep{
			{at: "2024-01-07T23:59:59Z", allowed: true, remaining: 0, end: "2024-01-08T00:00:00Z"},
			{at: "2024-01-08T00:00:00Z", allowed: true, remaining: 0, end: "2024-01-15T00:00:00Z"},
			{at: "2024-01-14T23:59:59Z", end: "2024-01-15T00:00:00Z"},
			{at: "2024-01-15T00:00:00Z", allowed: true, remaining: 0, end: "2024-01-22T00:00:00Z"},
		}),
		// A caller whose clock is behind (another node, near midnight):
		// its op names the day before, but the stored window is later and
		// stays current, as after a clock step back. Its end is then the
		// stored start plus the op's period (one day here).
		calendarCase("stored_window_later", "UTC", day, 2, []calStep{
			{at: "2024-05-02T00:00:01Z", allowed: true, remaining: 1, end: "2024-05-03T00:00:00Z"},
			{at: "2024-05-01T23:59:59Z", allowed: true, remaining: 0, end: "2024-05-03T00:00:00Z"},
			{at: "2024-05-02T00:00:02Z", end: "2024-05-03T00:00:00Z"},
		}),
		// A store whose clock is ahead of the caller's (Redis' TIME in
		// server-time mode): the op's window has ended by the store's now,
		// and so has its count (its TTL ran to the window's end). The
		// request is decided in the caller's window, read as empty, for the
		// 1µs floor (rules.fixedLeft), never a negative time; the next
		// window's op counts anew.
		calendarCase("now_past_window", "UTC", day, 1, []calStep{
			{at: "2024-05-01T23:59:59Z", allowed: true, remaining: 0, end: "2024-05-02T00:00:00Z"},
			{at: "2024-05-02T00:00:00.5Z", window: "2024-05-01T23:59:59.9Z", allowed: true, remaining: 0, end: "2024-05-02T00:00:00.500001Z"},
			{at: "2024-05-02T00:00:00.5Z", allowed: true, remaining: 0, end: "2024-05-03T00:00:00Z"},
		}),
	}
	// Check the tables' own arithmetic once: every window here is a day
	// of 23, 24 or 25 hours, a week of 7 days ±1 hour, or a month.
	for _, c := range cs {
		for i, st := range c.Steps {
			p := time.Duration(st.Ops[0].PeriodUS) * time.Microsecond
			if p < 23*time.Hour || p > 31*24*time.Hour+time.Hour {
				panic(fmt.Sprintf("storetest: %s step %d: window of %v", c.Name, i, p))
			}
		}
	}
	return cs
}
