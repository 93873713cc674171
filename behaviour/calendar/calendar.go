package calendar

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/rules"
)

// Feature returns the calendar quotas: period = "day", "week" or "month"
// and time_zone on rule { }.
func Feature() rules.Feature {
	f := rules.Feature{
		Name:      "calendar",
		RuleAttrs: []rules.RuleAttrType{{Name: "time_zone", Compile: compileTimeZone}},
	}
	for _, p := range []Period{Day, Week, Month} {
		f.Periods = append(f.Periods, rules.PeriodType{Name: p.String(), Compile: p.compile})
	}
	return f
}

// Period is a calendar period.
type Period uint8

const (
	// Day: midnight to midnight in the rule's zone.
	Day Period = iota + 1
	// Week: Monday 00:00 to Monday 00:00 (ISO 8601).
	Week
	// Month: the 1st at 00:00 to the next 1st at 00:00.
	Month
)

var names = [...]string{Day: "day", Week: "week", Month: "month"}

// String returns the period's policy name ("day", "week", "month"), or ""
// for another value.
func (p Period) String() string {
	if int(p) < len(names) {
		return names[p]
	}
	return ""
}

// nominal is the period's usual length, Rule.Period for a calendar rule:
// 24h, 7 × 24h, 31 × 24h (the longest month, without DST). Each window's
// own length is its op's PeriodUS.
func (p Period) nominal() time.Duration {
	switch p {
	case Day:
		return 24 * time.Hour
	case Week:
		return 7 * 24 * time.Hour
	case Month:
		return 31 * 24 * time.Hour
	}
	return 0
}

// Window returns the calendar window of period p that holds now in loc:
// its start and its end (exclusive), as instants. day starts at midnight,
// week on Monday at 00:00 (ISO 8601), month on the 1st at 00:00, all local
// to loc; the end is the next window's start. Where a zone skips midnight
// (a DST change at 00:00), the window starts at the instant Go's time.Date
// normalises that midnight to. It does not allocate. p must be Day, Week
// or Month (otherwise it returns now, now).
func Window(now time.Time, loc *time.Location, p Period) (start, end time.Time) {
	t := now.In(loc)
	y, m, d := t.Date()
	switch p {
	case Day:
		start, end = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case Week:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		start, end = time.Date(y, m, d-back, 0, 0, 0, 0, loc), time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case Month:
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

// Stage is a rule's calendar period: its ops count per window of Period
// in Zone.
type Stage struct {
	// Period is the rule's period = "day", "week" or "month".
	Period Period
	// Zone is its time_zone, UTC by default.
	Zone *time.Location
}

// Behaviour names the stage.
func (*Stage) Behaviour() string { return "calendar" }

// Of returns r's calendar period, or nil when r's period is a duration.
func Of(r *rules.Rule) *Stage {
	st, _ := rules.StageOf[*Stage](r)
	return st
}

// Shape sets m's op to the window of the stage's period that holds the
// request's now (Op.Calendar, WindowStartUS, and PeriodUS the window's
// own length); its IP ceiling's op copies it.
func (c *Stage) Shape(_ *rules.Request, s *rules.Scratch, m *rules.Match) {
	start, end := Window(s.Now(), c.Zone, c.Period)
	op := &s.Ops[m.Op]
	op.Calendar = true
	op.WindowStartUS = start.UnixMicro()
	op.PeriodUS = end.UnixMicro() - op.WindowStartUS
}

// LongestWindow is the longest window of the period, DST days included:
// 25 hours, a week and an hour, 31 days and an hour.
func (c *Stage) LongestWindow() time.Duration { return c.Period.nominal() + time.Hour }

// compile compiles period = p: a window counted by a fixed_window rule
// only, reported at the period otherwise.
func (p Period) compile(c *rules.Compiler, r *rules.Rule, rng hcl.Range) time.Duration {
	if r.Algorithm != rules.FixedWindow {
		c.Errorf(rng, "Calendar period needs fixed_window",
			"period = %q is a calendar window, counted by algorithm = \"fixed_window\" only; this rule's algorithm is %s. Set algorithm = \"fixed_window\", or write the period as a duration such as \"24h\"", p.String(), r.Algorithm)
		return 0
	}
	r.AddStage(&Stage{Period: p, Zone: time.UTC})
	return p.nominal()
}

// compileTimeZone compiles time_zone: an IANA zone name (time.LoadLocation,
// from the binary's embedded tzdata when the system has none), default
// UTC, on a rule with a calendar period only.
func compileTimeZone(c *rules.Compiler, r *rules.Rule, attr *hcl.Attribute) {
	var name *string
	if !c.Append(gohcl.DecodeExpression(attr.Expr, nil, &name)) || name == nil {
		return
	}
	rng := attr.Expr.Range()
	cal := Of(r)
	switch {
	case cal == nil:
		c.Errorf(rng, "time_zone not used", "time_zone applies to a calendar period (period = \"day\", \"week\" or \"month\" on a fixed_window rule); a duration's windows start at multiples of it since the Unix epoch. Remove time_zone")
		return
	case *name == "" || *name == "Local":
		// LoadLocation reads "" as UTC and "Local" as the host's zone,
		// which would make a policy mean different things on two nodes.
		c.Errorf(rng, "Invalid time_zone", "%q is not an IANA time zone name; write one such as \"UTC\", \"Europe/Paris\" or \"America/New_York\"", *name)
		return
	}
	loc, err := time.LoadLocation(*name)
	if err != nil {
		c.Errorf(rng, "Invalid time_zone", "%q is not an IANA time zone name; write one such as \"UTC\", \"Europe/Paris\" or \"America/New_York\"", *name)
		return
	}
	cal.Zone = loc
}
