package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/internal/dryrun"
	"github.com/edge-gateway/edge/rules"
)

// POST /admin/dry-run (docs/operations.md): a time-boxed dry-run toggle of
// one rule, or of the whole node with "rule": "*".
//
//	{"rule": "login-per-ip", "dry_run": true, "for": "30m", "reason": "INC-123 false positives"}
//	→ 200 {"rule": "login-per-ip", "dry_run": true, "until": "2026-12-02T01:00:00Z"}
//
// "for" is required when dry_run is true, at most maxDryRunFor; "reason"
// is always required. The toggle expires by itself, by the request clock.
// "dry_run": false removes the rule's toggle; it never overrides a
// policy's dry_run = true or the -dry-run flag (rules/dryrun.go), and the
// answer's dry_run says whether the rule is still in dry-run for them.
// 400 for an unknown rule or bad input; 503 when the fleet's Redis cannot
// take the toggle (nothing changed). Audited: actor, reason, rule, until.
//
// With a Redis store the toggles are fleet-wide: the node writes the toggle
// to the Redis hash "edge:dry-run" (field: the rule's name; value:
// fleetToggle as JSON) and every node, this one included, reads the whole
// hash every fleetPoll and applies it, so a toggle made on any node, and
// its expiry, reaches every node within fleetPoll. Without Redis toggles
// are this node's only. The hash keeps one field per rule name ever
// toggled (expired fields no longer apply); "dry_run": false replaces the
// field with a record of the off (fleetToggle.Off: who, why, when), which
// no node applies, so that every node can say who turned it off. Each node
// logs every toggle it picks up from the hash, on or off, with who and
// why (logFleetChanges); the node that took the toggle logs its audit
// line instead.

// maxDryRunFor caps a toggle's duration: a dry-run forgotten over a weekend
// is a limit silently off, so a longer one is a policy change (dry_run =
// true in the file, reviewed).
const maxDryRunFor = 24 * time.Hour

// fleetPoll is how often a node reads the fleet's toggles (issue 13: every
// node applies a toggle made on any node within one second).
const fleetPoll = time.Second

// fleetHash names the toggles' Redis hash, under the store's prefix.
const fleetHash = "dry-run"

// fleetTimeout bounds one read or write of the toggles' hash.
const fleetTimeout = 2 * time.Second

// fleetToggle is a toggle's value in the Redis hash.
type fleetToggle struct {
	Until  time.Time `json:"until"` // RFC 3339 with nanoseconds
	Reason string    `json:"reason"`
	Actor  string    `json:"actor"`
	// Off marks the record of a "dry_run": false: Until is then offUntil
	// (a node of a release before Off reads the record as a toggle that
	// ended long ago, and applies nothing) and At when it was turned off.
	Off bool      `json:"off,omitempty"`
	At  time.Time `json:"at,omitzero"`
}

// offUntil is the Until of an off record: over, whatever a node's clock.
// Not the zero time, which a node reads as a malformed toggle.
var offUntil = time.Unix(1, 0).UTC()

// fleetDryRuns shares dry-run toggles through Redis; nil without Redis.
type fleetDryRuns struct {
	rs Fleet
	// mu orders this node's writes with its polls, so a poll read before a
	// write never overwrites the write's local copy.
	mu   sync.Mutex
	last map[string]string // the hash as last applied
	// exempts is the fleet's record of exemptions as last read
	// (admin_forgive.go), by rule name.
	exempts map[string]time.Time
	bad     bool // the last poll failed (logged once per streak)
}

type dryRunRequest struct {
	Rule   string `json:"rule"`
	DryRun *bool  `json:"dry_run"`
	For    string `json:"for"`
	Reason string `json:"reason"`
}

// requestTime is the time a request is decided at: fasthttp's ctx.Time(),
// or the test clock.
func (s *Server) requestTime(ctx *fasthttp.RequestCtx) time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	return ctx.Time()
}

// now is the time outside a request (metrics): the test clock, or the
// system's.
func (s *Server) now() time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	return time.Now()
}

func (s *Server) adminDryRun(ctx *fasthttp.RequestCtx) {
	var req dryRunRequest
	if !readAdminJSON(ctx, &req) {
		return
	}
	req.Rule, req.Reason = strings.TrimSpace(req.Rule), strings.TrimSpace(req.Reason)
	p := s.Policy()
	var rule *rules.Rule
	switch {
	case req.Rule == "":
		adminError(ctx, fasthttp.StatusBadRequest, `"rule" is required: a rule's name, or "*" for every rule`)
		return
	case req.Rule != dryrun.Node:
		for _, r := range p.Rules {
			if r.Name == req.Rule {
				rule = r
			}
		}
		if rule == nil {
			adminError(ctx, fasthttp.StatusBadRequest, "unknown rule "+quote(req.Rule)+": GET /admin/rules lists them")
			return
		}
		if rule.Action == rules.ActionSkip {
			adminError(ctx, fasthttp.StatusBadRequest, "rule "+quote(req.Rule)+` is action = "skip": it refuses nothing, so dry-run has nothing to hold back`)
			return
		}
	}
	if req.DryRun == nil {
		adminError(ctx, fasthttp.StatusBadRequest, `"dry_run" is required: true or false`)
		return
	}
	if req.Reason == "" {
		adminError(ctx, fasthttp.StatusBadRequest, `"reason" is required: why, for the audit log`)
		return
	}
	if len(req.Reason) > 1024 {
		adminError(ctx, fasthttp.StatusBadRequest, `"reason" is over 1024 bytes`)
		return
	}
	on := *req.DryRun
	now := s.requestTime(ctx)
	var until time.Time
	switch {
	case on && req.For == "":
		adminError(ctx, fasthttp.StatusBadRequest, `"for" is required with "dry_run": true (such as "30m"; at most 24h): a toggle always expires`)
		return
	case on:
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 || d > maxDryRunFor {
			adminError(ctx, fasthttp.StatusBadRequest, `"for" must be a duration over 0 and at most 24h, such as "30m"`)
			return
		}
		until = now.Add(d)
	case req.For != "":
		adminError(ctx, fasthttp.StatusBadRequest, `"for" goes with "dry_run": true only`)
		return
	}
	who := actor(ctx)
	if err := s.setDryRun(ctx, req.Rule, on, until, req.Reason, who); err != nil {
		adminError(ctx, fasthttp.StatusServiceUnavailable, "the fleet's Redis did not take the toggle; nothing changed: "+err.Error())
		return
	}
	scope := "node"
	if s.fleet != nil {
		scope = "fleet"
	}
	s.audit(ctx, "dry-run", req.Reason, slog.String("rule", req.Rule), slog.Bool("dry_run", on),
		slog.String("until", rfc3339(until)), slog.String("scope", scope))
	eff := p.DryRun || s.engine.DryRunAt(now)
	if rule != nil {
		eff = !s.engine.RuleEnforces(p, rule, now)
	}
	adminJSON(ctx, fasthttp.StatusOK, map[string]any{"rule": req.Rule, "dry_run": eff, "until": rfc3339(until)})
}

// setDryRun applies a toggle: through the fleet's Redis hash first when
// there is one (an error changes nothing), then on this node.
func (s *Server) setDryRun(ctx context.Context, name string, on bool, until time.Time, reason, who string) error {
	f := s.fleet
	if f == nil {
		s.engine.DryRuns().Set(name, on, until, reason, who)
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, fleetTimeout)
	defer cancel()
	ft := fleetToggle{Until: until.UTC(), Reason: reason, Actor: who}
	if !on {
		ft = fleetToggle{Until: offUntil, Reason: reason, Actor: who, Off: true, At: s.now().UTC()}
	}
	b, _ := json.Marshal(ft) // cannot fail
	v := string(b)
	if err := f.rs.SharedSet(wctx, fleetHash, name, v); err != nil {
		return err
	}
	s.engine.DryRuns().Set(name, on, until, reason, who)
	// This node's audit line says it: its next poll applies the rest of
	// the hash without logging this toggle again.
	last := maps.Clone(f.last)
	if last == nil {
		last = map[string]string{}
	}
	last[name] = v
	f.last = last
	return nil
}

// syncDryRuns applies the fleet's toggles every fleetPoll until ctx is
// done. A failed read keeps the toggles in force (they expire by
// themselves) and is logged once until a read succeeds.
func (s *Server) syncDryRuns(ctx context.Context) {
	t := time.NewTicker(fleetPoll)
	defer t.Stop()
	for {
		s.pollDryRuns(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) pollDryRuns(ctx context.Context) {
	f := s.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, fleetTimeout)
	defer cancel()
	m, err := f.rs.SharedGetAll(rctx, fleetHash)
	if err == nil {
		err = s.pollExemptions(rctx, f) // forgives' exemptions ride along
	}
	if err != nil {
		if !f.bad && !errors.Is(err, context.Canceled) {
			s.log.Warn("reading the fleet's dry-run toggles; the ones in force stay until they expire", "error", err)
		}
		f.bad = true
		return
	}
	f.bad = false
	if maps.Equal(m, f.last) {
		return
	}
	ts := make([]dryrun.Toggle, 0, len(m))
	for name, v := range m {
		ft, ok := parseFleetToggle(v)
		if !ok {
			if v != f.last[name] {
				s.log.Warn("ignoring a malformed dry-run toggle in Redis", "rule", name)
			}
			continue
		}
		if ft.Off {
			continue // a record of an off: nothing to apply
		}
		ts = append(ts, dryrun.Toggle{Rule: name, Until: ft.Until, Reason: ft.Reason, Actor: ft.Actor})
	}
	s.engine.DryRuns().Replace(ts)
	s.logFleetChanges(f.last, m)
	f.last = m
}

// parseFleetToggle decodes a field of the toggles' hash; ok is false for
// a value no node wrote.
func parseFleetToggle(v string) (ft fleetToggle, ok bool) {
	if err := json.Unmarshal([]byte(v), &ft); err != nil || ft.Until.IsZero() {
		return fleetToggle{}, false
	}
	return ft, true
}

// logFleetChanges logs, at warn, one line for each toggle this poll
// picked up from the hash (last, the hash as last applied, nil before the
// first poll; m, as read now): "dry-run toggle from the fleet" with the
// rule ("*" for the whole node), its new state (dry_run), until, and who
// turned it on or off and why (actor, reason), so that every node of the
// fleet says when its limits stop or start refusing and on whose word.
// The first poll logs the toggles in force only; a field deleted from the
// hash (by a node of a release before off records, or by hand) is an off
// of unknown actor.
func (s *Server) logFleetChanges(last, m map[string]string) {
	now := s.now()
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := m[name]
		if prev, seen := last[name]; seen && prev == v {
			continue
		}
		ft, ok := parseFleetToggle(v)
		if !ok {
			continue // warned about above
		}
		switch {
		case ft.Off && last == nil:
			continue // an old off, before this node started
		case ft.Off:
			s.log.LogAttrs(context.Background(), slog.LevelWarn, "dry-run toggle from the fleet",
				slog.String("rule", name), slog.Bool("dry_run", false), slog.String("actor", ft.Actor),
				slog.String("reason", ft.Reason), slog.String("at", rfc3339(ft.At)), slog.String("scope", "fleet"))
		case !now.Before(ft.Until):
			continue // already over: nothing changed here
		default:
			s.log.LogAttrs(context.Background(), slog.LevelWarn, "dry-run toggle from the fleet",
				slog.String("rule", name), slog.Bool("dry_run", true), slog.String("until", rfc3339(ft.Until)),
				slog.String("actor", ft.Actor), slog.String("reason", ft.Reason), slog.String("scope", "fleet"))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(last)) {
		if _, ok := m[name]; ok {
			continue
		}
		if ft, ok := parseFleetToggle(last[name]); !ok || ft.Off || !now.Before(ft.Until) {
			continue // it applied nothing
		}
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "dry-run toggle from the fleet",
			slog.String("rule", name), slog.Bool("dry_run", false), slog.String("actor", ""),
			slog.String("reason", "its field was deleted from the Redis hash"), slog.String("scope", "fleet"))
	}
}

// rfc3339 formats t for the admin API, "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// quote quotes a name for an error message.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
