package rules

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Forgiving a key (docs/operations.md, "Forgive"): the locked-out customer
// on the phone with support. The operator names the rule and the values
// they know (an account, an IP address); the edge encodes them exactly as
// a request's values would be (KeyFromText), so the counter key it clears
// is the one the customer's requests count on, and no raw identity is
// kept or sent to a store.
//
// Forgive clears the key's counter (one OpReset, and what the rule's
// stages keep for it: its ban marker's when the rule has a ban, Forgiver)
// and, given a duration, writes an exemption marker that is present for
// exactly that long (exemptOp), as a ban's is (behaviour/ban). While it
// is present the rule does not hold the key to its limit: the key's op is
// decided without refusing or charging, as a known visitor's is
// (Scratch.TakeOut, behaviour/known), and the rule's ban does not refuse
// it. The marker expires by itself; nothing has to remember to end it.
//
// The marker is checked in the same store call as bans and known-visitor
// markers (precheck), and only for rules that have a live exemption, so a
// request to a rule nobody forgave costs nothing more. Which rules have
// one is this node's record of its own forgives: with a shared store, the
// counter a forgive clears is cleared for the fleet, and the exemption
// holds on the node that was asked.

// exemptFlag is flipped, not set, in an exemption marker's tag byte. A
// rule's keys all carry its first characteristic's tag with flags in the
// high bits (0x80: several parts, 0x40: a ceiling, 0x20: a marker, 0x10:
// a ban), so bit 3 is the same in all of them; flipping it makes a key no
// other key of the rule can be. Setting it would not: the tags 8 to 15
// (phone to route, account among them) already have it, and an account
// rule's exemption would be its own counter.
const exemptFlag = 0x08

// exemptKey is the exemption marker of a rule's key.
func exemptKey(k Key) Key {
	k[8] ^= exemptFlag
	return k
}

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
// for a request carrying these values. Every characteristic needs a value
// except global; a name the key does not have is an error, as is a value
// a request could not carry. It allocates; it is for the admin API, not
// the request path. The key is in the format the engine's requests are
// keyed in now (format 1 during a migration window, keyformat.go).
func (e *Engine) KeyFromText(p *Policy, r *Rule, values map[string]string) (Key, error) {
	_, k, err := e.keyFromText(p, r, values, e.mode(e.formats.Load(), time.Now()))
	return k, err
}

// keyFromText is KeyFromText in mode m; the Scratch it returns holds the
// key's format 2 twin in modeDual, for Engine.take.
func (e *Engine) keyFromText(p *Policy, r *Rule, values map[string]string, m keyMode) (*Scratch, Key, error) {
	s := &Scratch{owner: e, mode: m}
	k, err := e.keyText(p, r, values, s)
	return s, k, err
}

func (e *Engine) keyText(p *Policy, r *Rule, values map[string]string, s *Scratch) (Key, error) {
	var k Key
	if !r.counts() || len(r.Key) == 0 {
		return k, ErrNotForgivable
	}
	for name := range values {
		if !containsName(r.KeyNames, name) {
			return k, fmt.Errorf("rule %q has no %q in its key (its key is %s)", r.Name, name, strings.Join(r.KeyNames, ", "))
		}
	}
	buf := make([]byte, 0, 128)
	for i, ch := range r.Key {
		name := r.KeyNames[i]
		text, given := values[name]
		if !given && !r.keyShared[i] {
			return k, fmt.Errorf("rule %q counts on %s: give a value for each (missing %q)", r.Name, strings.Join(r.KeyNames, ", "), name)
		}
		tc, ok := ch.(TextCharacteristic)
		if !ok {
			return k, fmt.Errorf("%q cannot be given as a value: no operator knows it (forgive a rule keyed on what you do know, such as the ip)", name)
		}
		buf = append(buf, r.keyTags[i])
		n := len(buf)
		out, err := tc.AppendText(buf, text, p)
		switch {
		case err != nil:
			return k, fmt.Errorf("%s: %w", name, err)
		case len(out) < n || !bytes.Equal(out[:n], buf):
			return k, fmt.Errorf("%s: the characteristic dropped the key's earlier values", name)
		case len(out) == n && !r.keyShared[i]:
			return k, fmt.Errorf("%s: empty value", name)
		}
		buf = out
	}
	copy(k[0:8], r.ID[:])
	k[8] = r.keyTags[0]
	if len(r.Key) > 1 {
		k[8] |= 0x80
	}
	if s.mode.hmac() {
		s.mac = hmac.New(sha256.New, e.secret)
	}
	copy(k[9:], s.valueHash(buf))
	return k, nil
}

func containsName(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
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

// Forgive clears r's counter for the key values name (KeyFromText), and
// what its Forgiver stages keep for it (its ban), in one store call; with
// exempt > 0 (at most MaxExempt) the same call writes the key's exemption
// marker, under which r does not hold the key to its limit until
// now+exempt. The store's error is returned as is: then nothing may have
// been cleared.
func (e *Engine) Forgive(ctx context.Context, now time.Time, p *Policy, r *Rule, values map[string]string, exempt time.Duration) (Forgiven, error) {
	var f Forgiven
	if exempt < 0 || exempt > MaxExempt {
		return f, fmt.Errorf("exemption of %v: give one between 0 and %v", exempt, MaxExempt)
	}
	s, k, err := e.keyFromText(p, r, values, e.mode(e.formats.Load(), now))
	if err != nil {
		return f, err
	}
	f.Key = k
	ex := exemptKey(k)
	ops := []Op{{
		Kind: OpReset, Algorithm: r.Algorithm, Key: k, Limit: r.Limit, Burst: r.Burst,
		PeriodUS: r.PeriodUS(), Cost: 1, Enforce: true, OnError: r.OnStoreError,
		Sensitive: r.Sensitive, MaxKeys: int32(r.MaxKeys),
	}}
	r.shapeWindow(now, &ops[0]) // a calendar period's window (stage.go)
	for _, st := range r.stages {
		if f, ok := st.(Forgiver); ok {
			ops = f.Forgive(k, ops) // its ban's marker (behaviour/ban)
		}
	}
	if exempt > 0 {
		// The latest forgive's duration holds, not the sum of them: the
		// marker is cleared, then written, in a second call (a store
		// judges the ops of one call against the state before it).
		ops = append(ops, exemptOp(OpReset, r, ex, 0))
	}
	if err := e.take(ctx, now, s, ops, make([]Result, len(ops))); err != nil {
		return Forgiven{}, fmt.Errorf("forgiving %s: %w", r.Name, err)
	}
	if exempt <= 0 {
		return f, nil
	}
	ms := (exempt + time.Millisecond - 1) / time.Millisecond
	add := []Op{exemptOp(OpAdd, r, ex, int64(ms))}
	if err := e.take(ctx, now, s, add, make([]Result, 1)); err != nil {
		return f, fmt.Errorf("exempting %s: %w", r.Name, err) // cleared, not exempt
	}
	f.ExemptUntil = now.Add(ms * time.Millisecond)
	e.exempt.record(r.ID, f.ExemptUntil, now)
	return f, nil
}

// exemptUnits is an exemption marker's GCRA: one unit a millisecond over
// MaxExempt, as many units of burst.
const exemptUnits = int64(MaxExempt / time.Millisecond)

// exemptOp is an exemption marker's op: kind OpAdd with cost the
// exemption in milliseconds to write it, OpPeek (the cost given is
// ignored: the whole burst) to check it, OpReset to clear it.
//
// The marker cannot be a sliding_log counter as a ban is: a log's entry
// is present for the period of the op that reads it, and each forgive has
// its own duration. It is a GCRA of 1 ms emission interval and a day's
// burst: an add of n units puts its theoretical arrival time n ms ahead,
// and a peek of the whole burst is refused exactly while that time is
// still ahead, so the marker is present for the forgive's duration
// whatever the duration, and decays (and leaves the store, whose TTL is
// the decay) when it ends. A Marker, so the memory store keeps it in its
// rule's marker budget and never evicts it while it lasts.
func exemptOp(kind OpKind, r *Rule, k Key, cost int64) Op {
	if kind == OpPeek {
		cost = exemptUnits
	}
	return Op{
		Kind: kind, Algorithm: GCRA, Key: k, Limit: exemptUnits, Burst: exemptUnits,
		PeriodUS: MaxExempt.Microseconds(), Cost: cost, Enforce: true, OnError: FailOpen,
		Sensitive: true, MaxKeys: int32(r.MaxKeys), Marker: true,
		NetworkKeys: int32(r.NetworkKeys),
	}
}

// exemptions is an Engine's record of the rules with a live exemption
// made on this node, by rule ID, each with the end of its latest one:
// what the request path reads to decide whether to check markers at all.
// Copy on write: a forgive is rare, the read is on every request.
type exemptions struct {
	mu   sync.Mutex
	live atomic.Pointer[map[[8]byte]time.Time]
}

// record notes an exemption of rule id until until, dropping the ones
// over at now.
func (x *exemptions) record(id [8]byte, until, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	next := map[[8]byte]time.Time{id: until}
	if old := x.live.Load(); old != nil {
		for k, u := range *old {
			if u.After(now) && (k != id || u.After(until)) {
				next[k] = u
			}
		}
	}
	x.live.Store(&next)
}

// until returns the end of rule id's latest exemption, zero without one.
func (x *exemptions) until(id [8]byte) time.Time {
	if m := x.live.Load(); m != nil {
		return (*m)[id]
	}
	return time.Time{}
}

// Exempting returns the names of p's rules with a live exemption made on
// this node at now, sorted (the admin API lists them).
func (e *Engine) Exempting(p *Policy, now time.Time) []string {
	var out []string
	for _, r := range p.Rules {
		if e.exempt.until(r.ID).After(now) {
			out = append(out, r.Name)
		}
	}
	sort.Strings(out)
	return out
}

// exemptCheck is one exemption marker a request is checked against.
type exemptCheck struct {
	match int // index in Scratch.Matches
	key   Key
}

// queueExemptions adds the exemption checks of a request: each match with
// an op whose rule has a live exemption on this node. Without one (the
// usual case) it is one atomic load.
func (e *Engine) queueExemptions(now time.Time, s *Scratch) {
	live := e.exempt.live.Load()
	if live == nil || len(*live) == 0 {
		return
	}
	for i := range s.Matches {
		m := &s.Matches[i]
		if m.Op < 0 {
			continue
		}
		if u, ok := (*live)[m.Rule.ID]; ok && u.After(now) {
			s.exempts = append(s.exempts, exemptCheck{match: i, key: exemptKey(s.Ops[m.Op].Key)})
		}
	}
}

// appendExemptOps appends the peeks of the request's exemption checks to
// ops (precheck's call).
func (e *Engine) appendExemptOps(s *Scratch, ops []Op) []Op {
	for _, x := range s.exempts {
		r := s.Matches[x.match].Rule
		ops = append(ops, exemptOp(OpPeek, r, x.key, 0))
	}
	return ops
}

// markExempt takes the matches whose exemption marker is present (res, in
// the order of s.exempts) out of their rule (Scratch.TakeOut): decided,
// never refusing, never charged; Match.Forgiven is set. A fallback's guess
// (StoreError) exempts no one.
func (e *Engine) markExempt(s *Scratch, res []Result) {
	for i, x := range s.exempts {
		if res[i].Allowed || res[i].StoreError {
			continue
		}
		m := &s.Matches[x.match]
		s.TakeOut(m)
		m.Forgiven = true
	}
}

// HashClient is the keyed hash of a client address (HMAC-SHA256 under the
// key secret, as counter keys are, truncated to 15 bytes), for logs and
// the admin API: an operator can follow one client without the log
// holding its address. The address is hashed as the 16-byte form after a
// domain byte, so it never equals a counter key's hash. Call it after
// Check, whose engine's secret it uses; it allocates nothing.
func (s *Scratch) HashClient(a netip.Addr) (h [15]byte) {
	if s.mac == nil {
		s.mac = hmac.New(sha256.New, s.owner.secret) // a format 2 request made none
	}
	b := a.As16()
	s.mbuf = append(append(s.mbuf[:0], 0xfd), b[:]...)
	s.mac.Reset()
	s.mac.Write(s.mbuf)
	s.sum = s.mac.Sum(s.sum[:0])
	copy(h[:], s.sum)
	return h
}

// HashClient is Scratch.HashClient for callers off the request path.
func (e *Engine) HashClient(a netip.Addr) (h [15]byte) {
	b := a.As16()
	mac := hmac.New(sha256.New, e.secret)
	mac.Write([]byte{0xfd})
	mac.Write(b[:])
	copy(h[:], mac.Sum(nil))
	return h
}

// IdentityValues is how a forgive of an identity (docs/operations.md,
// "Forgive": an account, a visitor, an address or a phone, on every rule
// keyed on it) treats r: values are those of given that r's key names,
// and missing the characteristics of its key that need a value and were
// not given, in key order. A rule that counts nothing (action = "deny" or
// "skip"), or whose key names none of given, has no values: it is not
// keyed on the identity. With values and no missing, Forgive(values)
// clears the key the identity's requests count on; with missing, the
// caller says what else to give (a rule keyed on ["account", "ip"] needs
// the address too: its counters are per pair, and the store cannot list
// an account's pairs).
func (r *Rule) IdentityValues(given map[string]string) (values map[string]string, missing []string) {
	if !r.counts() || len(r.Key) == 0 {
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
		case !r.keyShared[i]:
			missing = append(missing, name)
		}
	}
	if values == nil {
		return nil, nil
	}
	return values, missing
}

// ExemptFrom notes an exemption of p's rule name made elsewhere in the
// fleet, until until (the fleet's record, read from Redis: the marker is
// in the shared store already, and this node checks markers only for the
// rules it knows have one). A name p lacks, or an end not after now,
// notes nothing.
func (e *Engine) ExemptFrom(p *Policy, name string, until, now time.Time) {
	r := p.Rule(name)
	if r == nil || !until.After(now) || !e.exempt.until(r.ID).Before(until) {
		return
	}
	e.exempt.record(r.ID, until, now)
}
