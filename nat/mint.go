package nat

import (
	"github.com/edge-gateway/edge/ipv6"
	"github.com/edge-gateway/edge/rules"
)

// The mint budget (docs/policy.md, "visitor"): how many new visitor IDs an
// address gets, so a client that drops its cookie cannot collect fresh
// budgets. A bulk budget alone (mint_limit per mint_period per address) is
// a budget the attacker can spend for everyone behind its address: ten
// cookieless GETs a minute, and no new visitor behind a NAT gets a cookie,
// so each stays in the address's cookieless bucket, which the attacker
// empties too (issue 24, harm 3c).
//
// So minting keeps a reserve for the clients that are not minting in bulk.
// Every request without a valid cookie carries, in its one store call:
//
//   - the bulk budget: a GCRA bucket of mint_limit per mint_period per
//     address, taken (never refusing: decided like a dry-run op);
//   - its fingerprint's budget: a GCRA bucket of one per mint_period per
//     address and fingerprint, taken; the fingerprint is a keyed hash of
//     the User-Agent, Accept-Language and JA4 the client sends (each
//     capped at 512 bytes), so a bulk minter spends its own fingerprint's
//     first, whatever it sends;
//   - the reserve: a GCRA bucket of mint_reserve per mint_period per
//     address, peeked.
//
// The request gets a new ID from the bulk budget when it allows one. Else,
// when its fingerprint has minted nothing this period and the peek found
// room, it may draw on the reserve: the draw is a take of the reserve (an
// OpTake) in the call after the origin's answer (rules.RequestSettler),
// and the ID is issued, its cookie set, only when that take allowed it.
// The take is the store's own conditional decision, so however many draws
// are in flight at once, no more than the reserve's room are allowed; the
// peek only keeps a request that cannot draw (the reserve found empty)
// from making the call after the origin for it. That call is the one more
// store call a request makes when it draws on the reserve, and only then. The origin learns a reserve ID from
// the client's next request (X-Edge-Visitor): while the request is at the
// origin, its ID is not issued yet.
//
// Bounds, per address: an attacker gets at most mint_limit + mint_reserve
// new IDs per mint_period, whatever its concurrency (GCRA buckets of those
// rates with bursts as large: that many at once, and over any time t at
// most (mint_limit + mint_reserve) × (1 + t/mint_period)), mint_reserve of
// them only by sending as many fingerprints; a client whose fingerprint
// the attacker did not send this period gets a cookie while the reserve
// has room (it is drained only by distinct fingerprints, one each); two
// clients behind one address that send the same fingerprint share its one
// draw a period, and a draw the reserve refused after the origin's answer
// (others in flight took its room) has spent its fingerprint's. On the
// decision-only listener, which has no call after the origin, minting
// draws on the bulk budget only.

// Tags of the mint budget's counters: under mintID, the bulk budget per
// address (TagIP, as it always was) and the reserve per address, kept
// apart by the key's flag bits; under fingerprintID, in a key budget of
// their own as large as the mint budget's (a flood of fingerprints evicts
// only fingerprints), one per address and fingerprint.
const (
	tagMintReserve     = rules.TagIP | 0x40
	tagMintFingerprint = rules.TagIP | 0x80
)

// fingerprintCap caps each header read into a fingerprint, in bytes.
const fingerprintCap = 512

var (
	hdrUserAgent      = []byte("User-Agent")
	hdrAcceptLanguage = []byte("Accept-Language")
)

// MintSource says where a request's new visitor ID comes from.
type MintSource uint8

const (
	// NoMint: the request gets no new ID.
	NoMint MintSource = iota
	// MintBulk: from the address's bulk budget (mint_limit).
	MintBulk
	// MintReserve: from the address's reserve (mint_reserve), for a
	// fingerprint that has minted nothing this period.
	MintReserve
)

// mintState is a request's mint ops beyond the bulk one (Memo.Op), and
// what the request minted.
type mintState struct {
	fingerprintOp, reserveOp int // indexes in Scratch.Ops, -1 without
	settleOp                 int // the reserve's take in Settle's ops, -1 without
	reserve                  rules.Key
	fp                       []byte // the fingerprint's encoded values
	source                   MintSource
	due                      bool // the reserve is taken in Settle's call
}

// MintFrom reports whether the request, decided as d, may get a new
// visitor ID, and from which budget: it has no valid cookie, it is
// forwarded, no rule refused it, and its address's bulk budget allowed one
// (MintBulk: the ID is the request's), or else the reserve had room and its
// fingerprint minted nothing this period (MintReserve: the ID is the
// request's only once the reserve's take allows it, DrawReserve and
// ReserveDrawn). A refused request never gets a cookie, and a store that
// decided nothing mints nothing (its fallback's answers mint from the bulk
// budget alone).
func (c *Config) MintFrom(s *rules.Scratch, d *rules.Decision) MintSource {
	m := s.Memo(c.slot)
	if m.Op < 0 || d.Refusing != nil || d.Verdict != rules.Forward {
		return NoMint
	}
	if d.StoreErr != nil && d.StoreErr != rules.ErrStoreFallback {
		return NoMint // the store decided nothing
	}
	ms := &stateOf(m).mint
	ms.source = NoMint
	switch {
	case s.Res[m.Op].Allowed:
		ms.source = MintBulk
	case ms.fingerprintOp >= 0 && decided(s.Res[ms.fingerprintOp]) && decided(s.Res[ms.reserveOp]):
		ms.source = MintReserve
	}
	return ms.source
}

// decided reports an op the store allowed itself, not its fallback.
func decided(r rules.Result) bool { return r.Allowed && !r.StoreError }

// MayMint reports whether the request, decided as d, may get a new
// visitor ID (MintFrom, either budget).
func (c *Config) MayMint(s *rules.Scratch, d *rules.Decision) bool { return c.MintFrom(s, d) != NoMint }

// DrawReserve is called, for a request MintFrom gave MintReserve, before
// the Engine.Settle call (made even when Decision.Settle is false) after
// the origin's answer, when the answer may carry the new ID's cookie: it
// reports whether a draw is due, which that call then takes from the
// reserve (AfterOrigin). ReserveDrawn then says whether it was allowed.
func (c *Config) DrawReserve(s *rules.Scratch) bool {
	m := s.Memo(c.slot)
	if m.Op < 0 {
		return false
	}
	ms := &stateOf(m).mint
	ms.due = ms.source == MintReserve
	return ms.due
}

// ReserveDrawn reports, after the Engine.Settle call that took the draw
// DrawReserve made due, whether the reserve allowed it: then, and only
// then, the request gets its new ID. A take the store did not decide
// itself (an error, its fallback's answer) allows nothing.
func (c *Config) ReserveDrawn(s *rules.Scratch) bool {
	m := s.Memo(c.slot)
	if m.Op < 0 {
		return false
	}
	ms := &stateOf(m).mint
	r, ok := s.SettleResult(ms.settleOp)
	return ok && ms.settleOp >= 0 && decided(r)
}

// BeforeStore adds the mint budget's ops for a request without a valid
// cookie, at the policy's client grouping: the bulk budget's take, and
// with a reserve, the fingerprint's take and the reserve's peek. They
// never refuse (not enforcing: decided like dry-run ops) and consume only
// when the request is forwarded.
func (c *Config) BeforeStore(req *rules.Request, s *rules.Scratch) {
	m := s.Memo(c.slot)
	st := stateOf(m)
	ms := &st.mint
	ms.fingerprintOp, ms.reserveOp, ms.settleOp, ms.source, ms.due = -1, -1, -1, NoMint, false
	if m.Done && st.valid {
		return
	}
	m.Value = ipv6.AppendKey(m.Value[:0], req.Client, c.ipv4, c.ipv6)
	m.Op = s.AddOp(c.mintOp(rules.OpTake, s.HashKey(mintID, rules.TagIP, m.Value), c.MintLimit))
	if c.MintReserve <= 0 {
		return
	}
	ms.reserve = s.HashKey(mintID, tagMintReserve, m.Value) // the same values: hashed once
	ms.fp = appendFingerprint(append(ms.fp[:0], m.Value...), req)
	fop := c.mintOp(rules.OpTake, s.HashKey(fingerprintID, tagMintFingerprint, ms.fp), 1)
	fop.MaxKeys = int32(c.Fingerprints.MaxKeys)
	ms.fingerprintOp = s.AddOp(fop)
	ms.reserveOp = s.AddOp(c.mintOp(rules.OpPeek, ms.reserve, c.MintReserve))
}

// AfterOrigin takes the reserve for the draw DrawReserve made due, in
// Engine.Settle's call (rules.RequestSettler): an OpTake that never
// refuses (decided like a dry-run op), decided on its own since that call
// holds no other take (its ops are refunds, resets and adds), and read by
// ReserveDrawn.
func (c *Config) AfterOrigin(s *rules.Scratch, _ int, _ []byte, settle []rules.Op) []rules.Op {
	m := s.Memo(c.slot)
	if m.Op < 0 {
		return settle
	}
	ms := &stateOf(m).mint
	ms.settleOp = -1
	if !ms.due {
		return settle
	}
	ms.due = false
	ms.settleOp = len(settle)
	return append(settle, c.mintOp(rules.OpTake, ms.reserve, c.MintReserve))
}

// mintOp is a mint budget op: a GCRA bucket of limit per mint_period,
// with a burst of limit, in the mint budget.
func (c *Config) mintOp(kind rules.OpKind, k rules.Key, limit int64) rules.Op {
	return rules.Op{
		Kind: kind, Algorithm: rules.GCRA, Key: k, Limit: limit, Burst: limit,
		PeriodUS: c.MintPeriod.Microseconds(), Cost: 1, OnError: rules.FailLocal, MaxKeys: int32(c.Mint.MaxKeys),
	}
}

// appendFingerprint appends what a client sends that tells clients behind
// one address apart, each value capped at fingerprintCap bytes: its
// User-Agent, Accept-Language and JA4 (nil without TLS or a trusted
// proxy's). The encoded values are hashed with the key secret, never
// kept.
func appendFingerprint(buf []byte, req *rules.Request) []byte {
	var ua, lang []byte
	if req.Fields != nil {
		ua, lang = req.Fields.Header(hdrUserAgent), req.Fields.Header(hdrAcceptLanguage)
	}
	buf = rules.AppendValue(buf, ua[:min(len(ua), fingerprintCap)])
	buf = rules.AppendValue(buf, lang[:min(len(lang), fingerprintCap)])
	return rules.AppendValue(buf, req.JA4[:min(len(req.JA4), fingerprintCap)])
}

var _ rules.RequestSettler = (*Config)(nil)
