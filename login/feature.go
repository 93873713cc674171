package login

import (
	"bytes"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/fields"
	"github.com/edge-gateway/edge/internal/memo"
	"github.com/edge-gateway/edge/rules"
)

// Feature returns the login feature: the account and email attributes of
// the identity { } block (where the login or signup identifier and the
// email address come from), the account and email characteristics (each
// normalised as an identity provider compares it), and the
// account_aliases rule attribute (docs/policy.md).
func Feature() rules.Feature {
	return rules.Feature{
		Name: "login",
		Blocks: []rules.BlockType{{
			Type: "identity", Attrs: []string{"account", "email"}, Identities: []string{"account", "email"},
			Decode: decodeIdentity,
		}},
		Characteristics: []rules.CharacteristicType{
			{Name: "account", Tag: rules.TagAccount, Compile: compileIdentifier("account", func(id *Identity) *Identifier { return &id.account })},
			{Name: "email", Tag: rules.TagEmail, Compile: compileIdentifier("email", func(id *Identity) *Identifier { return &id.email })},
		},
		RuleAttrs: []rules.RuleAttrType{{Name: "account_aliases", Compile: compileAliases}},
	}
}

// Identity is login's part of the identity { } block.
type Identity struct {
	// Account are the account identifier's sources (a username, an
	// email), in the order listed; every one present counts.
	Account []fields.Source
	// Email are the email address's sources: a rule that means the inbox
	// (one signup budget per inbox) keys on "email", never on an account
	// whose username may be anything.
	Email []fields.Source

	account, email Identifier
}

// Identifier is one of login's identities as a rule reads it: its sources,
// its on_conflict and its memo slots (plain, and alias-folded).
type Identifier struct {
	name            string
	srcs            []fields.Source
	conflict        rules.Conflict
	slot, aliasSlot int
}

// IdentityOf returns login's part of p's identity block, or nil.
func IdentityOf(p *rules.Policy) *Identity {
	for _, v := range p.Blocks("identity") {
		if id, ok := v.(*Identity); ok {
			return id
		}
	}
	return nil
}

type identityBlock struct {
	Account hcl.Expression `hcl:"account,optional"`
	Email   hcl.Expression `hcl:"email,optional"`
}

func decodeIdentity(c *rules.Compiler, b *hcl.Block) any {
	var x identityBlock
	if !c.Decode(b, &x) {
		return nil
	}
	if rules.IsNull(x.Account) && rules.IsNull(x.Email) {
		return nil
	}
	id := &Identity{}
	ident := func(name string, expr hcl.Expression) Identifier {
		srcs := fields.CompileSources(c, expr, name)
		return Identifier{name: name, srcs: srcs, conflict: c.OnConflict(name),
			slot: c.Slot("login." + name), aliasSlot: c.Slot("login." + name + "+aliases")}
	}
	if !rules.IsNull(x.Account) {
		id.account = ident("account", x.Account)
		id.Account = id.account.srcs
	}
	if !rules.IsNull(x.Email) {
		id.email = ident("email", x.Email)
		id.Email = id.email.srcs
	}
	return id
}

func compileIdentifier(name string, of func(*Identity) *Identifier) func(c *rules.Compiler, r *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
	return func(c *rules.Compiler, r *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
		id := IdentityOf(c.Policy())
		if id == nil || len(of(id).srcs) == 0 {
			c.Errorf(r.DefRange, "Missing identity source", "rule %q counts per %s; list where the %s comes from in identity { %s = [...] }", r.Name, name, name, name)
			return nil
		}
		ident := of(id)
		return &accountChar{id: ident, slot: ident.slot, max: fields.MaxValues(ident.srcs)}
	}
}

// accountChar is "account" or "email": the identifier from every source of
// the identity that is present, read as every origin reads it
// (fields.Lookup), normalised (Normalizer). Sources that disagree give
// several values, each counted (rules.MultiCharacteristic), unless the
// identity's on_conflict is "reject" (Invalid). Absent: Missing. Present
// but unreadable one way only, or empty once normalised: Invalid. Known and
// unknown accounts are counted alike: the edge cannot tell them apart, and
// does not try.
type accountChar struct {
	id      *Identifier
	slot    int
	aliases bool // account_aliases: provider aliases folded
	max     int  // fields.MaxValues of the sources
}

// accountState is a Scratch's normaliser and the request's values
// (Memo.State): their normal forms, which rules count, and the values as
// they were sent, which name the caller exactly (AppendCaller).
type accountState struct {
	n       Normalizer
	vals    fields.Values
	raw     fields.Values
	aliases bool
}

// Add normalises v as an account and keeps it unless already kept
// (fields.Normal), and keeps v as it was sent unless already kept.
func (st *accountState) Add(v string) bool {
	out, err := st.n.Normalize(st.vals.Tail(), v, st.aliases)
	if err != nil {
		st.vals.Drop(out)
		return false
	}
	st.vals.Keep(out)
	st.raw.Keep(append(st.raw.Tail(), v...))
	return true
}

// Len returns the number of distinct accounts kept (fields.Normal).
func (st *accountState) Len() int { return st.vals.Len() }

// Reset forgets the request before's accounts (fields.Normal).
func (st *accountState) Reset() { st.vals.Reset(); st.raw.Reset() }

func (a *accountChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	return a.AppendValueAt(buf, 0, req, s)
}

// MaxValues returns the most accounts a request can carry: its sources
// that can be present together (rules.MultiCharacteristic).
func (a *accountChar) MaxValues() int { return a.max }

// Values returns how many distinct accounts the request carries.
func (a *accountChar) Values(req *rules.Request, s *rules.Scratch) int {
	return max(a.state(req, s).vals.Len(), 1)
}

// AppendValueAt appends the request's i-th distinct account.
func (a *accountChar) AppendValueAt(buf []byte, i int, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	st := a.state(req, s)
	m := s.Memo(a.slot)
	if m.Status != rules.Present || i >= st.vals.Len() {
		return buf, m.Status
	}
	return rules.AppendValue(buf, st.vals.At(i)), rules.Present
}

// AppendCaller appends the account exactly as the request sent it, before
// any folding (rules.CallerCharacteristic): a known marker names it, so
// that an attacker's own "rené" (or "Rene"), which an origin that keeps
// spellings apart logs in as an account of its own, makes its browser
// known for that spelling alone and never for the victim's "rene" it is
// counted with; an origin that folds them would have needed the victim's
// password. A request whose sources sent different spellings, even of one
// normal form, names no one caller: Invalid.
func (a *accountChar) AppendCaller(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	st := a.state(req, s)
	if m := s.Memo(a.slot); m.Status != rules.Present {
		return buf, m.Status
	}
	if st.raw.Len() != 1 {
		return buf, rules.Invalid
	}
	return rules.AppendValue(buf, st.raw.At(0)), rules.Present
}

// Folds reports whether the account counted is not exactly what the
// request sent (a spelling folded into its normal form, or several
// spellings): the counter may hold the failures of another account that
// an origin keeps apart, so a success clears nothing
// (rules.CallerCharacteristic).
func (a *accountChar) Folds(req *rules.Request, s *rules.Scratch) bool {
	st := a.state(req, s)
	return st.raw.Len() != 1 || st.vals.Len() != 1 || !bytes.Equal(st.raw.At(0), st.vals.At(0))
}

// state returns the request's accounts, resolved at most once per request:
// every source present, in the order listed (fields.Resolve).
func (a *accountChar) state(req *rules.Request, s *rules.Scratch) *accountState {
	m := s.Memo(a.slot)
	st := memo.State[accountState](m)
	st.aliases = a.aliases
	fields.ResolveOnce(m, a.id.srcs, a.id.conflict, st, req, s)
	return st
}

// compileAliases is account_aliases = true: the rule's account and email
// characteristics (in its key or its count_distinct) fold email provider
// aliases (appendAliasFolded), for signup rules.
func compileAliases(c *rules.Compiler, r *rules.Rule, a *hcl.Attribute) {
	var on bool
	if !c.Append(gohcl.DecodeExpression(a.Expr, nil, &on)) || !on {
		return
	}
	found := false
	for _, ch := range append(r.Key[:len(r.Key):len(r.Key)], r.Distinct) {
		if ac, ok := ch.(*accountChar); ok {
			ac.aliases, ac.slot, found = true, ac.id.aliasSlot, true
		}
	}
	if !found {
		c.Errorf(a.NameRange, "account_aliases without account", "account_aliases applies to rules keyed on \"account\" or \"email\" or counting distinct ones")
	}
}

// AppendText is an account an operator names (forgive): normalised as a
// request's account is, aliases folded when the rule folds them.
func (a *accountChar) AppendText(buf []byte, text string, _ *rules.Policy) ([]byte, error) {
	var n Normalizer
	v, err := n.Normalize(nil, text, a.aliases)
	if err != nil {
		return buf, err
	}
	return rules.AppendValue(buf, v), nil
}

var (
	_ rules.TextCharacteristic   = (*accountChar)(nil)
	_ rules.MultiCharacteristic  = (*accountChar)(nil)
	_ rules.CallerCharacteristic = (*accountChar)(nil)
)
