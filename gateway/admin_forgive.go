package gateway

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/rules"
)

// forgiveRequest is POST /admin/forgive's body (docs/operations.md,
// "Forgive"): either Rule and Key (one rule's key), or Identity (every
// rule keyed on it).
type forgiveRequest struct {
	// Rule names the rule whose counter to clear.
	Rule string `json:"rule"`
	// Key gives a value for each characteristic of the rule's key, by the
	// name the key writes it ("account", "ip", "header:X-Api-Key"), as the
	// operator knows it: the edge encodes and hashes it as a request's.
	Key map[string]string `json:"key"`
	// Identity, without Rule, forgives every rule of the running policy
	// keyed on it: values by characteristic name as in Key ("account",
	// "ip", "phone"), and "visitor", a visitor cookie's value, with
	// "visitor_ip", the address it was at (or "ip", which then forgives
	// the address's rules too). Rules whose key needs a value not given
	// are skipped and named in the answer.
	Identity map[string]string `json:"identity"`
	// For, a Go duration up to the forgive's MaxExempt (a day), also exempts the key from
	// the rule for that long; empty: clear only.
	For string `json:"for"`
	// Reason is required: it goes to the audit log with the actor.
	Reason string `json:"reason"`
}

// forgiveAnswer is POST /admin/forgive's answer for one rule.
type forgiveAnswer struct {
	Rule        string `json:"rule"`
	Cleared     bool   `json:"cleared"`
	ExemptUntil string `json:"exempt_until"` // RFC 3339, or empty without an exemption
	Scope       string `json:"scope"`        // "fleet" (a Redis store) or "node"
}

// identityAnswer is POST /admin/forgive's answer for an identity.
type identityAnswer struct {
	// Forgiven lists the rules cleared, each with its key's keyed hash
	// (as the decision logs show it).
	Forgiven []forgivenRule `json:"forgiven"`
	// Skipped lists the rules keyed on the identity that need more values
	// than were given, and which.
	Skipped     []skippedRule `json:"skipped"`
	ExemptUntil string        `json:"exempt_until"`
	Scope       string        `json:"scope"`
}

type forgivenRule struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
}

type skippedRule struct {
	Rule    string   `json:"rule"`
	Missing []string `json:"missing"`
}

// exemptHash names the fleet's record of exemptions, a Redis hash under
// the store's prefix: field the rule's name, value fleetExempt as JSON.
// The markers are in the shared store already; the record tells every
// node which rules to check them for (ext.Pardoner.ExemptFrom), read with
// the dry-run toggles every fleetPoll.
const exemptHash = "exempt"

// fleetExempt is an exemption's value in the fleet's hash.
type fleetExempt struct {
	Until time.Time `json:"until"`
}

// adminForgive clears one key's counter on a rule, or an identity's on
// every rule keyed on it, and with "for" exempts it for a while
// (ext.Pardoner: behaviour/forgive): for the locked-out customer on the
// phone with support. With a Redis store, for the fleet: the counters and
// markers are shared, and the exemption's rule is recorded for every
// node. One audit line with the actor, the reason and the keys' hashes,
// never their values.
func (s *Server) adminForgive(ctx *fasthttp.RequestCtx) {
	pd := s.ext.pardoner
	if pd == nil {
		adminError(ctx, fasthttp.StatusNotImplemented, "this gateway has no forgive: its extensions (builtin.Extensions) carry none")
		return
	}
	var req forgiveRequest
	if !readAdminJSON(ctx, &req) {
		return
	}
	req.Reason = strings.TrimSpace(req.Reason)
	if req.Reason == "" {
		adminError(ctx, fasthttp.StatusBadRequest, `"reason" is required: say why, for the audit log`)
		return
	}
	var exempt time.Duration
	if req.For != "" {
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 || d > pd.MaxExempt() {
			adminError(ctx, fasthttp.StatusBadRequest, `"for" must be a duration between 1s and 24h, such as "1h"`)
			return
		}
		exempt = d
	}
	switch {
	case req.Rule != "" && req.Identity != nil:
		adminError(ctx, fasthttp.StatusBadRequest, `give "rule" and "key" (one rule), or "identity" (every rule keyed on it), not both`)
		return
	case req.Rule == "" && len(req.Identity) > 0:
		s.forgiveIdentity(ctx, pd, req, exempt)
		return
	case req.Rule == "":
		adminError(ctx, fasthttp.StatusBadRequest, `"rule" and "key", or "identity", is required`)
		return
	}
	st := s.state.Load()
	p := st.policy
	r := p.Rule(req.Rule)
	if r == nil {
		adminError(ctx, fasthttp.StatusBadRequest, "no rule named "+req.Rule+" in the running policy")
		return
	}
	now := s.requestTime(ctx)
	values := maps.Clone(req.Key) // a visitor cookie, at visitor_ip: its text (forgiveTexts)
	if msg := s.forgiveTexts(st, values, req.Key, now); msg != "" {
		adminError(ctx, fasthttp.StatusBadRequest, msg)
		return
	}
	req.Key = values
	key, until, err := pd.Forgive(ctx, s.engine, now, p, r, req.Key, exempt)
	switch {
	case err != nil && key == (rules.Key{}):
		if _, kerr := pd.KeyFromText(s.engine, p, r, req.Key); kerr != nil {
			adminError(ctx, fasthttp.StatusBadRequest, kerr.Error()) // the operator's values
			return
		}
		adminError(ctx, fasthttp.StatusServiceUnavailable, "the store did not answer, nothing cleared: "+err.Error())
		return
	case err != nil:
		adminError(ctx, fasthttp.StatusServiceUnavailable, "cleared, but the store did not take the exemption: "+err.Error())
		return
	}
	ans := forgiveAnswer{Rule: r.Name, Cleared: true, Scope: s.forgiveScope()}
	attrs := []slog.Attr{slog.String("rule", r.Name), slog.String("key", hex.EncodeToString(key[9:])), slog.String("scope", ans.Scope)}
	if !until.IsZero() {
		ans.ExemptUntil = until.UTC().Format(time.RFC3339)
		attrs = append(attrs, slog.String("for", exempt.String()), slog.String("exempt_until", ans.ExemptUntil))
		if err := s.shareExemption(ctx, r.Name, until); err != nil {
			s.audit(ctx, "forgive", req.Reason, attrs...)
			adminError(ctx, fasthttp.StatusServiceUnavailable, "cleared and exempt on this node, but the fleet's Redis did not take the exemption's record (the other nodes do not check it): "+err.Error())
			return
		}
	}
	s.audit(ctx, "forgive", req.Reason, attrs...)
	adminJSON(ctx, fasthttp.StatusOK, ans)
}

// forgiveScope is where a forgive holds: the fleet's with a Redis store.
func (s *Server) forgiveScope() string {
	if s.fleet != nil {
		return "fleet"
	}
	return "node"
}

// forgiveIdentity is adminForgive for an identity: every rule of the
// running policy whose key the identity's values name in full
// (identityValues) is forgiven, after every key has been
// worked out (a value no request could carry is a 400, and nothing is
// cleared); rules keyed on the identity that need more are listed as
// skipped. A store that fails midway is a 503 that names the rules
// already forgiven.
func (s *Server) forgiveIdentity(ctx *fasthttp.RequestCtx, pd ext.Pardoner, req forgiveRequest, exempt time.Duration) {
	st := s.state.Load()
	p := st.policy
	now := s.requestTime(ctx)
	given, names, msg := s.identityGiven(st, req.Identity, now)
	if msg != "" {
		adminError(ctx, fasthttp.StatusBadRequest, msg)
		return
	}
	type plan struct {
		r      *rules.Rule
		values map[string]string
	}
	var plans []plan
	ans := identityAnswer{Forgiven: []forgivenRule{}, Skipped: []skippedRule{}, Scope: s.forgiveScope()}
	for _, r := range p.Rules {
		values, missing := identityValues(r, given)
		switch {
		case values == nil:
			continue
		case len(missing) > 0:
			ans.Skipped = append(ans.Skipped, skippedRule{Rule: r.Name, Missing: missing})
			continue
		}
		if _, err := pd.KeyFromText(s.engine, p, r, values); err != nil {
			adminError(ctx, fasthttp.StatusBadRequest, "rule "+r.Name+": "+err.Error()+"; nothing forgiven")
			return
		}
		plans = append(plans, plan{r, values})
	}
	if len(plans) == 0 {
		msg := "nothing to forgive: no rule of the running policy is keyed on " + strings.Join(names, " and ") + " alone"
		for _, sk := range ans.Skipped {
			msg += "; rule " + sk.Rule + " needs " + strings.Join(sk.Missing, " and ") + " too"
		}
		adminError(ctx, fasthttp.StatusBadRequest, msg)
		return
	}
	var until time.Time
	keys := make([]string, 0, len(plans))
	audit := func() {
		attrs := []slog.Attr{slog.String("identity", strings.Join(names, ",")), slog.Any("forgiven", keys), slog.String("scope", ans.Scope)}
		if len(ans.Skipped) > 0 {
			sk := make([]string, len(ans.Skipped))
			for i, x := range ans.Skipped {
				sk[i] = x.Rule
			}
			attrs = append(attrs, slog.Any("skipped", sk))
		}
		if !until.IsZero() {
			attrs = append(attrs, slog.String("for", exempt.String()), slog.String("exempt_until", rfc3339(until)))
		}
		s.audit(ctx, "forgive", req.Reason, attrs...)
	}
	for _, pl := range plans {
		key, exemptUntil, err := pd.Forgive(ctx, s.engine, now, p, pl.r, pl.values, exempt)
		if err == nil && !exemptUntil.IsZero() {
			until = exemptUntil
			err = s.shareExemption(ctx, pl.r.Name, exemptUntil)
		}
		if err != nil {
			if len(keys) > 0 {
				audit()
			}
			done := "nothing forgiven"
			if len(ans.Forgiven) > 0 {
				names := make([]string, len(ans.Forgiven))
				for i, x := range ans.Forgiven {
					names[i] = x.Rule
				}
				done = "forgiven before it: " + strings.Join(names, ", ")
			}
			adminError(ctx, fasthttp.StatusServiceUnavailable, "rule "+pl.r.Name+": the store did not answer ("+done+"): "+err.Error())
			return
		}
		h := hex.EncodeToString(key[9:])
		ans.Forgiven = append(ans.Forgiven, forgivenRule{Rule: pl.r.Name, Key: h})
		keys = append(keys, pl.r.Name+":"+h)
	}
	ans.ExemptUntil = rfc3339(until)
	audit()
	adminJSON(ctx, fasthttp.StatusOK, ans)
}

// identityGiven reads forgive's identity: the values to forgive by
// characteristic name (a visitor cookie turned into its text,
// forgiveTexts; visitor_ip, which only qualifies it, left out) and their
// names, sorted. msg is the operator's error, "" when done.
func (s *Server) identityGiven(st *policyState, identity map[string]string, now time.Time) (given map[string]string, names []string, msg string) {
	given = make(map[string]string, len(identity))
	aux := s.forgiveAux()
	for k, v := range identity {
		if aux[k] != "" {
			continue // visitor_ip: it qualifies a visitor cookie
		}
		if strings.TrimSpace(v) == "" {
			return nil, nil, "identity " + quote(k) + " is empty"
		}
		given[k] = v
		names = append(names, k)
	}
	sort.Strings(names)
	if msg := s.forgiveTexts(st, given, identity, now); msg != "" {
		return nil, nil, msg
	}
	for k := range identity {
		if name := aux[k]; name != "" {
			if _, ok := given[name]; !ok {
				return nil, nil, quote(k) + " goes with " + quote(name) + " only"
			}
		}
	}
	if len(given) == 0 {
		return nil, nil, `"identity" names no identity: give "account", "visitor", "ip", "phone" or another characteristic of a rule's key`
	}
	return given, names, ""
}

// forgiveTexts rewrites, in values, each identity an extension reads in a
// form of its own (ext.Forgiver: a visitor cookie) into its
// characteristic's text form, as a request's value would be read, taking
// the values that qualify it (visitor_ip) from given and out of values. It
// returns the operator's error, "" when done.
func (s *Server) forgiveTexts(st *policyState, values, given map[string]string, now time.Time) string {
	for i, e := range s.ext.list {
		f, ok := e.(ext.Forgiver)
		if !ok {
			continue
		}
		name, aux := f.ForgiveNames()
		v, ok := values[name]
		if !ok {
			continue
		}
		for _, a := range aux {
			delete(values, a)
		}
		text, err := f.ForgiveText(st.hooks.insts[i], v, given, now)
		if err != nil {
			return err.Error()
		}
		values[name] = text
	}
	return ""
}

// forgiveAux maps the names of the values that only qualify an identity
// (ext.Forgiver: "visitor_ip") to the identity's ("visitor").
func (s *Server) forgiveAux() map[string]string {
	m := map[string]string{}
	for _, e := range s.ext.list {
		if f, ok := e.(ext.Forgiver); ok {
			name, aux := f.ForgiveNames()
			for _, a := range aux {
				m[a] = name
			}
		}
	}
	return m
}

// shareExemption records rule name's exemption until until in the fleet's
// hash, so that every node checks its markers (nothing without Redis).
// The latest end holds: an earlier one is never written over a later.
func (s *Server) shareExemption(ctx context.Context, name string, until time.Time) error {
	f := s.fleet
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, fleetTimeout)
	defer cancel()
	if old, ok := f.exempts[name]; ok && !old.Before(until) {
		return nil
	}
	v, _ := json.Marshal(fleetExempt{Until: until.UTC()}) // cannot fail
	if err := f.rs.SharedSet(wctx, exemptHash, name, string(v)); err != nil {
		return err
	}
	return nil
}

// pollExemptions notes the fleet's exemptions on this node's engine
// (ext.Pardoner.ExemptFrom), under f.mu. A failed read keeps what this
// node knows (each ends by itself); it is logged with the toggles'.
func (s *Server) pollExemptions(ctx context.Context, f *fleetDryRuns) error {
	if s.ext.pardoner == nil {
		return nil // no forgive: no exemption to note
	}
	m, err := f.rs.SharedGetAll(ctx, exemptHash)
	if err != nil {
		return err
	}
	p, now := s.Policy(), s.now()
	next := make(map[string]time.Time, len(m))
	for name, v := range m {
		var fe fleetExempt
		if err := json.Unmarshal([]byte(v), &fe); err != nil || fe.Until.IsZero() {
			continue
		}
		next[name] = fe.Until
		s.ext.pardoner.ExemptFrom(s.engine, p, name, fe.Until, now)
	}
	f.exempts = next
	return nil
}

// identityValues is how a forgive of an identity (docs/operations.md,
// "Forgive": an account, a visitor, an address or a phone, on every rule
// keyed on it) treats r: values are those of given that r's key names,
// and missing the characteristics of its key that need a value and were
// not given, in key order. A rule that counts nothing (action = "deny" or
// "skip"), or whose key names none of given, has no values: it is not
// keyed on the identity. With values and no missing, a forgive of values
// clears the key the identity's requests count on; with missing, the
// caller says what else to give (a rule keyed on ["account", "ip"] needs
// the address too: its counters are per pair, and the store cannot list
// an account's pairs).
func identityValues(r *rules.Rule, given map[string]string) (values map[string]string, missing []string) {
	if !r.Counts() || len(r.Key) == 0 {
		return nil, nil
	}
	for i, name := range r.KeyNames {
		v, ok := given[name]
		switch {
		case ok:
			if values == nil {
				values = map[string]string{}
			}
			values[name] = v
		case !r.KeyShared(i):
			missing = append(missing, name)
		}
	}
	if values == nil {
		return nil, nil
	}
	return values, missing
}
