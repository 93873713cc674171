package rules

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// TextCharacteristic is a characteristic whose value an operator can
// name: the admin API's forgive turns the text into the key a request
// carrying it would count on. A characteristic that cannot be named
// (visitor: an ID the edge mints and nobody else knows) does not
// implement it, and KeyFromText refuses it by name.
type TextCharacteristic interface {
	// AppendText appends the value a request carrying text would have,
	// encoded exactly as AppendValue encodes it, to buf, and returns it;
	// an error for a text no request could carry (an address that does
	// not parse, a phone number that is not possible). p is the policy
	// the rule belongs to (its client settings, its path case).
	AppendText(buf []byte, text string, p *Policy) ([]byte, error)
}

// ErrNotForgivable is returned by KeyFromText for a rule that counts
// nothing (action = "deny", "skip").
var ErrNotForgivable = errors.New("rule counts nothing: there is no key to forgive")

// KeyFromText returns r's counter key for the values an operator gives,
// by characteristic as the rule's key names them (KeyNames: "account",
// "ip", "header:X-Api-Key"): the key's bytes are those Engine.Check makes
// for a request carrying these values, in the key format of now (format 1
// in a migration window). Every characteristic needs a value except
// global; a name the key does not have is an error, as is a value a
// request could not carry. It allocates: it is for the admin API.
func (e *Engine) KeyFromText(p *Policy, r *Rule, values map[string]string) (Key, error) {
	_, k, err := e.keyFromText(p, r, values, time.Now())
	return k, err
}

// keyFromText is KeyFromText at now; the Scratch it returns holds the
// key's twin in a migration or rotation window, for Engine.take.
func (e *Engine) keyFromText(p *Policy, r *Rule, values map[string]string, now time.Time) (*Scratch, Key, error) {
	s := &Scratch{owner: e}
	s.keys.Begin(e.keys, now, 0) // an operator's call: no network
	var k Key
	if !r.counts() || len(r.Key) == 0 {
		return s, k, ErrNotForgivable
	}
	for name := range values {
		if !slices.Contains(r.KeyNames, name) {
			return s, k, fmt.Errorf("rule %q has no %q in its key (its key is %s)", r.Name, name, strings.Join(r.KeyNames, ", "))
		}
	}
	buf := make([]byte, 0, 128)
	for i, ch := range r.Key {
		name := r.KeyNames[i]
		text, given := values[name]
		if !given && !r.keyShared[i] {
			return s, k, fmt.Errorf("rule %q counts on %s: give a value for each (missing %q)", r.Name, strings.Join(r.KeyNames, ", "), name)
		}
		tc, ok := ch.(TextCharacteristic)
		if !ok {
			return s, k, fmt.Errorf("%q cannot be given as a value: no operator knows it (forgive a rule keyed on what you do know, such as the ip)", name)
		}
		buf = append(buf, r.keyTags[i])
		n := len(buf)
		out, err := tc.AppendText(buf, text, p)
		switch {
		case err != nil:
			return s, k, fmt.Errorf("%s: %w", name, err)
		case len(out) < n || !bytes.Equal(out[:n], buf):
			return s, k, fmt.Errorf("%s: the characteristic dropped the key's earlier values", name)
		case len(out) == n && !r.keyShared[i]:
			return s, k, fmt.Errorf("%s: empty value", name)
		}
		buf = out
	}
	copy(k[0:8], r.ID[:])
	k[8] = r.keyTags[0]
	if len(r.Key) > 1 {
		k[8] |= 0x80
	}
	copy(k[9:], s.keys.Hash(buf))
	return s, k, nil
}

// MaxExempt bounds a forgive's exemption: a day, as a dry-run toggle is
// bounded (docs/operations.md), so a forgotten exemption cannot outlive
// the incident by much.
const MaxExempt = 24 * time.Hour

// Forgiven is what Forgive did.
type Forgiven struct {
	// Key is the counter key cleared (its bytes hex-encoded are what the
	// logs and explain show).
	Key Key
	// ExemptUntil is when the exemption ends; zero without one.
	ExemptUntil time.Time
}

// Forgive (docs/operations.md, "Forgive": the locked-out customer on the
// phone with support) clears r's counter for the key values name
// (KeyFromText; no raw value is kept or sent to a store), and what its
// Forgiver stages keep for it (its ban), in one store call; with
// exempt > 0 (at most MaxExempt, and a policy with Exemptions) it writes
// the key's exemption in a second call, under which r does not hold the
// key to its limit until the exemption's end (Forgiven.ExemptUntil). The
// store's error is returned as is: then nothing may have been cleared.
func (e *Engine) Forgive(ctx context.Context, now time.Time, p *Policy, r *Rule, values map[string]string, exempt time.Duration) (Forgiven, error) {
	var f Forgiven
	if exempt < 0 || exempt > MaxExempt {
		return f, fmt.Errorf("exemption of %v: give one between 0 and %v", exempt, MaxExempt)
	}
	s, k, err := e.keyFromText(p, r, values, now)
	if err != nil {
		return f, err
	}
	if exempt > 0 && p.exemptions == nil {
		return f, fmt.Errorf("rule %q: the policy grants no exemption (it was loaded without behaviour/forgive)", r.Name)
	}
	f.Key = k
	s.now, s.Ops = now, []Op{{
		Kind: OpReset, Algorithm: r.Algorithm, Key: k, Limit: r.Limit, Burst: r.Burst,
		PeriodUS: r.PeriodUS(), Cost: 1, Enforce: true, OnError: r.OnStoreError,
		Sensitive: r.Sensitive, MaxKeys: int32(r.MaxKeys),
	}}
	m := Match{Rule: r, Op: 0, CeilingOp: -1, Enforce: true}
	for _, sh := range r.shapers {
		if w, ok := sh.(WindowShaper); ok {
			w.Shape(nil, s, &m) // the reset's window as a request's op has it (a calendar period's)
		}
	}
	ops := s.Ops
	for _, st := range r.stages {
		if f, ok := st.(Forgiver); ok {
			ops = f.Forgive(k, ops) // its ban's marker (behaviour/ban)
		}
	}
	var write []Op // cleared, then written in a second call: the latest forgive's duration holds
	if exempt > 0 {
		ops, write, f.ExemptUntil = p.exemptions.Exempt(r, k, now, exempt, ops)
	}
	if err := e.take(ctx, now, s, ops, make([]Result, len(ops))); err != nil {
		return Forgiven{}, fmt.Errorf("forgiving %s: %w", r.Name, err)
	}
	if len(write) == 0 {
		return f, nil
	}
	if err := e.take(ctx, now, s, write, make([]Result, len(write))); err != nil {
		return Forgiven{Key: k}, fmt.Errorf("exempting %s: %w", r.Name, err) // cleared, not exempt
	}
	p.exemptions.Record(e, r, f.ExemptUntil, now)
	return f, nil
}

// ExemptFrom notes an exemption of p's rule name made elsewhere in the
// fleet until until (the fleet's record, read from Redis: its marker is in
// the shared store, and a node checks only the exemptions it knows of). A
// name p lacks, or an end not after now, notes nothing.
func (e *Engine) ExemptFrom(p *Policy, name string, until, now time.Time) {
	if r := p.Rule(name); r != nil && p.exemptions != nil && until.After(now) {
		p.exemptions.Record(e, r, until, now)
	}
}

// HashClient is the keyed hash of a client address (keyhash.Keys.HashClient:
// HMAC-SHA256 under the key secret, truncated to 15 bytes, never equal to
// a counter key's hash), for logs and the admin API: an operator can follow
// one client without the log holding its address. Call it after Check,
// whose engine's secret it uses; it allocates nothing.
func (s *Scratch) HashClient(a netip.Addr) [15]byte { return s.keys.HashClient(a) }

// HashClient is Scratch.HashClient for callers off the request path.
func (e *Engine) HashClient(a netip.Addr) [15]byte { return e.keys.HashClient(a) }

// KeyOptional reports whether the i-th characteristic of r's key takes no
// value (CharacteristicType.Shared: global), which a forgive need not name.
func (r *Rule) KeyOptional(i int) bool { return r.keyShared[i] }
