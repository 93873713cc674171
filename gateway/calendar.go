package gateway

import (
	"time"

	"github.com/edge-gateway/edge/behaviour/calendar"
	"github.com/edge-gateway/edge/rules"
)

// policyWindow is RateLimit-Policy's w for m, before rounding up to whole
// seconds: draft-ietf-httpapi-ratelimit-headers §3.1 makes w "the time
// window" of the quota in seconds. For a rule whose period is a duration
// it is that duration; for a calendar period (period = "day", "week" or
// "month", behaviour/calendar) it is the current window's own length, the
// op's PeriodUS: 82800 for a 23-hour day across a DST change, 2678400 for
// 31 days (docs/headers.md). RateLimit's t counts to the same window's end.
func policyWindow(rs *reqState, m *rules.Match) time.Duration {
	if calendar.Of(m.Rule) != nil && m.Op >= 0 && m.Op < len(rs.sc.Ops) {
		return rules.DurationUS(rs.sc.Ops[m.Op].PeriodUS)
	}
	return m.Rule.Period
}

// periodText is a rule's period as GET /admin/rules shows it: a duration
// ("1m0s"), or a calendar period with its zone ("month Europe/Paris").
func periodText(r *rules.Rule) string {
	if c := calendar.Of(r); c != nil {
		return c.Period.String() + " " + c.Zone.String()
	}
	return r.Period.String()
}
