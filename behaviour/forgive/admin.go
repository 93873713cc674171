package forgive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edge-gateway/edge/rules"
)

// MaxExempt bounds a forgive's exemption: a day, as a dry-run toggle is
// bounded (docs/operations.md), so a forgotten exemption cannot outlive
// the incident by much.
const MaxExempt = 24 * time.Hour

// ErrNotForgivable is returned by KeyFromText and Forgive for a rule that
// counts nothing (action = "deny", "skip").
var ErrNotForgivable = errors.New("rule counts nothing: there is no key to forgive")

// Forgiven is what Forgive did.
type Forgiven struct {
	// Key is the counter key cleared (its bytes hex-encoded are what the
	// logs and explain show).
	Key rules.Key
	// ExemptUntil is when the exemption ends; zero without one.
	ExemptUntil time.Time
}

// KeyFromText returns r's counter key for the values an operator gives,
// by characteristic as the rule's key names them (Rule.KeyNames:
// "account", "ip", "header:X-Api-Key"): the key's bytes are those
// Engine.Check makes for a request carrying these values, in the key
// format of now (format 1 in a migration window). Every characteristic
// needs a value except global; a name the key does not have is an error,
// as is a value a request could not carry (rules.TextCharacteristic). It
// allocates: it is for the admin API.
func KeyFromText(e *rules.Engine, p *rules.Policy, r *rules.Rule, values map[string]string) (rules.Key, error) {
	_, k, err := keyFromText(e, p, r, values, time.Now())
	return k, err
}

// keyFromText is KeyFromText at now; the Scratch it returns holds the
// key's twin in a migration or rotation window, for Engine.Send.
func keyFromText(e *rules.Engine, p *rules.Policy, r *rules.Rule, values map[string]string, now time.Time) (*rules.Scratch, rules.Key, error) {
	s := e.OffRequest(now)
	if !r.Counts() || len(r.Key) == 0 {
		return s, rules.Key{}, ErrNotForgivable
	}
	for name := range values {
		if !slices.Contains(r.KeyNames, name) {
			return s, rules.Key{}, fmt.Errorf("rule %q has no %q in its key (its key is %s)", r.Name, name, strings.Join(r.KeyNames, ", "))
		}
	}
	buf := make([]byte, 0, 128)
	for i, ch := range r.Key {
		name := r.KeyNames[i]
		text, given := values[name]
		if !given && !r.KeyShared(i) {
			return s, rules.Key{}, fmt.Errorf("rule %q counts on %s: give a value for each (missing %q)", r.Name, strings.Join(r.KeyNames, ", "), name)
		}
		tc, ok := ch.(rules.TextCharacteristic)
		if !ok {
			return s, rules.Key{}, fmt.Errorf("%q cannot be given as a value: no operator knows it (forgive a rule keyed on what you do know, such as the ip)", name)
		}
		buf = append(buf, r.KeyTag(i))
		n := len(buf)
		out, err := tc.AppendText(buf, text, p)
		switch {
		case err != nil:
			return s, rules.Key{}, fmt.Errorf("%s: %w", name, err)
		case len(out) < n || !bytes.Equal(out[:n], buf):
			return s, rules.Key{}, fmt.Errorf("%s: the characteristic dropped the key's earlier values", name)
		case len(out) == n && !r.KeyShared(i):
			return s, rules.Key{}, fmt.Errorf("%s: empty value", name)
		}
		buf = out
	}
	return s, s.RuleKey(r, buf), nil
}

// Forgive (docs/operations.md, "Forgive": the locked-out customer on the
// phone with support) clears r's counter for the key values name
// (KeyFromText; no raw value is kept or sent to a store), and what its
// rules.Forgiver stages keep for it (its ban), in one store call; with
// exempt > 0 (at most MaxExempt, and p loaded with Feature) it writes the
// key's exemption in a second call, under which r does not hold the key
// to its limit until the exemption's end (Forgiven.ExemptUntil). The
// store's error is returned as is: then nothing may have been cleared.
func Forgive(ctx context.Context, e *rules.Engine, now time.Time, p *rules.Policy, r *rules.Rule, values map[string]string, exempt time.Duration) (Forgiven, error) {
	var f Forgiven
	if exempt < 0 || exempt > MaxExempt {
		return f, fmt.Errorf("exemption of %v: give one between 0 and %v", exempt, MaxExempt)
	}
	s, k, err := keyFromText(e, p, r, values, now)
	if err != nil {
		return f, err
	}
	x, _ := p.Value("forgive").(*exemptions)
	if exempt > 0 && x == nil {
		return f, fmt.Errorf("rule %q: the policy grants no exemption (it was loaded without behaviour/forgive)", r.Name)
	}
	f.Key = k
	s.Ops = []rules.Op{{
		Kind: rules.OpReset, Algorithm: r.Algorithm, Key: k, Limit: r.Limit, Burst: r.Burst,
		PeriodUS: r.PeriodUS(), Cost: 1, Enforce: true, OnError: r.OnStoreError,
		Sensitive: r.Sensitive, MaxKeys: int32(r.MaxKeys),
	}}
	m := rules.Match{Rule: r, Op: 0, CeilingOp: -1, Enforce: true}
	for _, st := range r.Stages() {
		if w, ok := st.(rules.WindowShaper); ok {
			w.Shape(nil, s, &m) // the reset's window as a request's op has it (a calendar period's)
		}
	}
	ops := s.Ops
	for _, st := range r.Stages() {
		if f, ok := st.(rules.Forgiver); ok {
			ops = f.Forgive(k, ops) // its ban's marker (behaviour/ban)
		}
	}
	var write []rules.Op // cleared, then written in a second call: the latest forgive's duration holds
	if exempt > 0 {
		ops, write, f.ExemptUntil = x.exempt(r, k, now, exempt, ops)
	}
	if err := e.Send(ctx, now, s, ops, make([]rules.Result, len(ops))); err != nil {
		return Forgiven{}, fmt.Errorf("forgiving %s: %w", r.Name, err)
	}
	if len(write) == 0 {
		return f, nil
	}
	if err := e.Send(ctx, now, s, write, make([]rules.Result, len(write))); err != nil {
		return Forgiven{Key: k}, fmt.Errorf("exempting %s: %w", r.Name, err) // cleared, not exempt
	}
	recordOf(e).record(r.ID, f.ExemptUntil, now)
	return f, nil
}

// ExemptFrom notes an exemption of p's rule name made elsewhere in the
// fleet until until (the fleet's record, read from Redis: its marker is in
// the shared store, and a node checks only the exemptions it knows of). A
// name p lacks, a policy loaded without Feature, or an end not after now,
// notes nothing.
func ExemptFrom(e *rules.Engine, p *rules.Policy, name string, until, now time.Time) {
	if r := p.Rule(name); r != nil && p.Value("forgive") != nil && until.After(now) {
		recordOf(e).record(r.ID, until, now)
	}
}
