// Package calendar is the calendar quotas of rule { } blocks
// (docs/policy.md, "Calendar quotas"): a fixed_window rule whose period is
// "day", "week" or "month" counts per calendar window in its time_zone (an
// IANA name, default "UTC") instead of per multiple of a duration since
// the Unix epoch:
//
//	day    from midnight to the next midnight
//	week   from Monday 00:00 to the next Monday 00:00 (ISO 8601 weeks)
//	month  from the 1st at 00:00 to the next month's 1st at 00:00
//
// all in the zone's local time, so a day across a DST change lasts 23 or
// 25 hours and a month 28 to 31 days (±1 hour in March and October).
//
// It is a rules.Feature (builtin.Features lists it): the three words are
// its rules.PeriodType values and time_zone its rule attribute, and they
// compile to one Stage per rule, a rules.WindowShaper. As each op is made
// it computes the window holding the Engine's now for every op and hands
// it to the store in the op: Op.Calendar, Op.WindowStartUS and Op.PeriodUS
// (the window's own length). The stores need no time-zone data: the
// memory store and the Redis script count in [WindowStartUS, WindowStartUS
// + PeriodUS) as they count in a plain fixed window, so a new window is a
// new count on every store (the stored window's start is older than the
// op's: it reads as empty), and the key's TTL is the time to the window's
// end.
//
// The window comes from the Engine's clock, so the stores need no zone
// data and every store counts the same window. With a Redis store in
// server-time mode (rules/redisstore's package doc, "Time") the script
// decides by Redis' TIME, which near a boundary can lie outside the window
// the node chose, by the clocks' skew. Chosen: the node's window decides
// which count a request joins; by Redis' time its wait and TTL count to
// that window's end, at least 1µs (rules' fixedLeft), never negative. A
// node ahead of Redis starts the new window early (Redis' now before its
// start: the wait is the whole window plus the skew); a node behind finds
// the old window's count expired once Redis has passed its end (decided
// against an empty count that lives 1µs: at most the skew's worth of
// requests go uncounted), or joins the new window once another node has
// written it (a stored window later than the op's stays current, as after
// a clock step back). The error is bounded by the skew around each
// boundary, as for a plain window; no window's quota is granted twice. The
// alternative, computing the window in the script from TIME, would need
// the zone's rules in Lua.
//
// A compiled Stage is immutable and safe for concurrent use; Window
// allocates nothing.
package calendar
