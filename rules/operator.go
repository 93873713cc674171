package rules

import (
	"context"
	"net/netip"
	"time"
)

// TextCharacteristic is a characteristic whose value an operator can
// name: the admin API's forgive (behaviour/forgive's KeyFromText) turns
// the text into the key a request carrying it would count on. A
// characteristic that cannot be named (visitor: an ID the edge mints and
// nobody else knows) does not implement it, and the forgive refuses it by
// name.
type TextCharacteristic interface {
	// AppendText appends the value a request carrying text would have,
	// encoded exactly as AppendValue encodes it, to buf, and returns it;
	// an error for a text no request could carry (an address that does
	// not parse, a phone number that is not possible). p is the policy
	// the rule belongs to (its client settings, its path case).
	AppendText(buf []byte, text string, p *Policy) ([]byte, error)
}

// OffRequest returns a Scratch for the ops e sends at now with no request
// behind them (an operator's forgive, behaviour/forgive): its keys are
// hashed in the key format of now (RuleKey), for no client network, and
// Send sends them with their twins in a migration or rotation window. It
// allocates: it is for the admin API.
func (e *Engine) OffRequest(now time.Time) *Scratch {
	s := &Scratch{owner: e, now: now}
	s.keys.Begin(e.keys, now, 0)
	return s
}

// Send sends ops in one store call for s (a Scratch of OffRequest), as
// Check sends a request's: each with its twin in a migration or rotation
// window, decided on both. len(res) must equal len(ops); the store's
// error is returned as is.
func (e *Engine) Send(ctx context.Context, now time.Time, s *Scratch, ops []Op, res []Result) error {
	return e.take(ctx, now, s, ops, res)
}

// RuleKey returns the counter key of r whose key values, each after its
// characteristic's tag (Rule.KeyTag), encode into buf: r's ID, its first
// characteristic's tag (0x80 set for a key of several), and the keyed
// hash of buf in s's key format. Check keys a request's ops so.
func (s *Scratch) RuleKey(r *Rule, buf []byte) Key {
	return s.HashKey(r.ID, r.keyTag(), buf)
}

// keyTag is the tag byte of r's keys: its first characteristic's tag,
// 0x80 set for a key of several. Engine.key writes it in place of
// RuleKey on the request path; both read it here, so they agree.
func (r *Rule) keyTag() byte {
	if len(r.Key) > 1 {
		return r.keyTags[0] | 0x80
	}
	return r.keyTags[0]
}

// HashClient is the keyed hash of a client address (keyhash.Keys.HashClient:
// HMAC-SHA256 under the key secret, truncated to 15 bytes, never equal to
// a counter key's hash), for logs and the admin API: an operator can follow
// one client without the log holding its address. Call it after Check,
// whose engine's secret it uses; it allocates nothing.
func (s *Scratch) HashClient(a netip.Addr) [15]byte { return s.keys.HashClient(a) }

// HashClient is Scratch.HashClient for callers off the request path.
func (e *Engine) HashClient(a netip.Addr) [15]byte { return e.keys.HashClient(a) }
