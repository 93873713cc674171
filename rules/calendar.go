package rules

import "time"

// Calendar quotas (docs/policy.md, "Calendar quotas"): a fixed_window rule
// whose period is "day", "week" or "month" counts per calendar window in
// its time_zone (an IANA name, default "UTC") instead of per multiple of a
// duration since the Unix epoch:
//
//	day    from midnight to the next midnight
//	week   from Monday 00:00 to the next Monday 00:00 (ISO 8601 weeks)
//	month  from the 1st at 00:00 to the next month's 1st at 00:00
//
// all in the zone's local time, so a day across a DST change lasts 23 or
// 25 hours and a month 28 to 31 days (±1 hour in March and October).
//
// The Engine computes the window holding its clock's now for every op
// (Rule.calendarOp) and hands it to the store in the op: Op.Calendar,
// Op.WindowStartUS and Op.PeriodUS (the window's own length). The stores
// need no time-zone data: the memory store and the Redis script count in
// [WindowStartUS, WindowStartUS + PeriodUS) as they count in a plain
// fixed window, so a new window is a new count on every store (the stored
// window's start is older than the op's: it reads as empty), and the key's
// TTL is the time to the window's end.
//
// The window comes from the Engine's clock, so the stores need no zone
// data and every store counts the same window. With a Redis store in
// server-time mode (rules/redisstore's package doc, "Time") the script
// decides by Redis' TIME, which near a boundary can lie outside the window
// the node chose, by the clocks' skew. Chosen: the node's window decides
// which count a request joins; by Redis' time its wait and TTL count to
// that window's end, at least 1µs (fixedLeft), never negative. A node
// ahead of Redis starts the new window early (Redis' now before its start:
// the wait is the whole window plus the skew); a node behind finds the old
// window's count expired once Redis has passed its end (decided against an
// empty count that lives 1µs: at most the skew's worth of requests go
// uncounted), or joins the new window once another node has written it (a
// stored window later than the op's stays current, as after a clock step
// back). The error is bounded by the skew around each boundary, as for a
// plain window; no window's quota is granted twice. The alternative,
// computing the window in the script from TIME, would need the zone's
// rules in Lua.

// CalendarPeriod is a rule's calendar period, or NoCalendar for a
// duration.
type CalendarPeriod uint8

const (
	// NoCalendar: the period is a duration (windows at multiples of it
	// since the epoch).
	NoCalendar CalendarPeriod = iota
	// CalendarDay: midnight to midnight in the rule's zone.
	CalendarDay
	// CalendarWeek: Monday 00:00 to Monday 00:00 (ISO 8601).
	CalendarWeek
	// CalendarMonth: the 1st at 00:00 to the next 1st at 00:00.
	CalendarMonth
)

var calendarNames = [...]string{CalendarDay: "day", CalendarWeek: "week", CalendarMonth: "month"}

// String returns the period's policy name ("day", "week", "month"), or ""
// for NoCalendar.
func (p CalendarPeriod) String() string {
	if int(p) < len(calendarNames) {
		return calendarNames[p]
	}
	return ""
}

// nominal is the period's usual length, Rule.Period for a calendar rule:
// 24h, 7 × 24h, 31 × 24h (the longest month, without DST). Each window's
// own length is its op's PeriodUS.
func (p CalendarPeriod) nominal() time.Duration {
	switch p {
	case CalendarDay:
		return 24 * time.Hour
	case CalendarWeek:
		return 7 * 24 * time.Hour
	case CalendarMonth:
		return 31 * 24 * time.Hour
	}
	return 0
}

// parseCalendar returns the calendar period a period attribute names.
func parseCalendar(s string) (CalendarPeriod, bool) {
	for i, n := range calendarNames {
		if n != "" && n == s {
			return CalendarPeriod(i), true
		}
	}
	return NoCalendar, false
}

// CalendarWindow returns the calendar window of period p that holds now in
// loc: its start and its end (exclusive), as instants. day starts at
// midnight, week on Monday at 00:00 (ISO 8601), month on the 1st at 00:00,
// all local to loc; the end is the next window's start. Where a zone skips
// midnight (a DST change at 00:00), the window starts at the instant Go's
// time.Date normalises that midnight to. It does not allocate. p must not
// be NoCalendar (then it returns now, now).
func CalendarWindow(now time.Time, loc *time.Location, p CalendarPeriod) (start, end time.Time) {
	t := now.In(loc)
	y, m, d := t.Date()
	switch p {
	case CalendarDay:
		start, end = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case CalendarWeek:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		start, end = time.Date(y, m, d-back, 0, 0, 0, 0, loc), time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case CalendarMonth:
		start, end = time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		return now, now
	}
	if start.After(now) {
		// A midnight normalised forward past now (a zone that skips
		// midnight, now in the hour skipped): the window starts at now's
		// side of it, as the day's first instant there.
		start = now
	}
	return start, end
}

// calendarOp sets op's window to r's calendar window holding now
// (Op.Calendar, WindowStartUS, PeriodUS). r.Calendar must be set.
func (r *Rule) calendarOp(now time.Time, op *Op) {
	start, end := CalendarWindow(now, r.Zone, r.Calendar)
	op.Calendar = true
	op.WindowStartUS = start.UnixMicro()
	op.PeriodUS = end.UnixMicro() - op.WindowStartUS
}

// calendarPeriod compiles a period that names a calendar window ("day",
// "week", "month"), reporting whether it does: then r.Calendar is set and
// r.Period is its nominal length, or a diagnostic is reported at the
// period when r's algorithm is not fixed_window.
func (c *Compiler) calendarPeriod(rb *ruleBlock, r *Rule) bool {
	p, ok := parseCalendar(*rb.Period)
	if !ok {
		return false
	}
	if r.Algorithm != FixedWindow {
		c.Errorf(rb.PeriodRange, "Calendar period needs fixed_window",
			"period = %q is a calendar window, counted by algorithm = \"fixed_window\" only; this rule's algorithm is %s. Set algorithm = \"fixed_window\", or write the period as a duration such as \"24h\"", *rb.Period, r.Algorithm)
		return true
	}
	r.Calendar, r.Period = p, p.nominal()
	return true
}

// timeZone compiles time_zone: an IANA zone name (time.LoadLocation, from
// the binary's embedded tzdata when the system has none), default UTC, on
// a rule with a calendar period only.
func (c *Compiler) timeZone(rb *ruleBlock, r *Rule) {
	r.Zone = time.UTC
	if rb.TimeZone == nil {
		return
	}
	name := *rb.TimeZone
	switch {
	case r.Calendar == NoCalendar:
		c.Errorf(rb.TimeZoneRange, "time_zone not used", "time_zone applies to a calendar period (period = \"day\", \"week\" or \"month\" on a fixed_window rule); a duration's windows start at multiples of it since the Unix epoch. Remove time_zone")
		return
	case name == "" || name == "Local":
		// LoadLocation reads "" as UTC and "Local" as the host's zone,
		// which would make a policy mean different things on two nodes.
		c.Errorf(rb.TimeZoneRange, "Invalid time_zone", "%q is not an IANA time zone name; write one such as \"UTC\", \"Europe/Paris\" or \"America/New_York\"", name)
		return
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		c.Errorf(rb.TimeZoneRange, "Invalid time_zone", "%q is not an IANA time zone name; write one such as \"UTC\", \"Europe/Paris\" or \"America/New_York\"", name)
		return
	}
	r.Zone = loc
}
