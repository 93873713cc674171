package login

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/fields"
	"github.com/edge-gateway/edge/rules"
)

// Feature returns the login feature: the account attribute of the identity
// { } block (where the account identifier comes from), the account
// characteristic (the identifier normalised as an identity provider
// compares it), and the account_aliases rule attribute (docs/policy.md).
func Feature() rules.Feature {
	return rules.Feature{
		Name:            "login",
		Blocks:          []rules.BlockType{{Type: "identity", Attrs: []string{"account"}, Decode: decodeIdentity}},
		Characteristics: []rules.CharacteristicType{{Name: "account", Tag: rules.TagAccount, Compile: compileAccount}},
		RuleAttrs:       []rules.RuleAttrType{{Name: "account_aliases", Compile: compileAliases}},
	}
}

// Identity is login's part of the identity { } block.
type Identity struct {
	// Account are the account identifier's sources, tried in order.
	Account []fields.Source

	slot, aliasSlot int // memo slots: the account plain, and alias-folded
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
}

func decodeIdentity(c *rules.Compiler, b *hcl.Block) any {
	var x identityBlock
	if !c.Append(gohcl.DecodeBody(b.Body, nil, &x)) {
		return nil
	}
	if rules.IsNull(x.Account) {
		return nil
	}
	return &Identity{
		Account:   fields.CompileSources(c, x.Account, "account"),
		slot:      c.Slot("login.account"),
		aliasSlot: c.Slot("login.account+aliases"),
	}
}

func compileAccount(c *rules.Compiler, r *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
	id := IdentityOf(c.Policy())
	if id == nil || len(id.Account) == 0 {
		c.Errorf(r.DefRange, "Missing identity source", "rule %q counts per account; list where the account comes from in identity { account = [...] }", r.Name)
		return nil
	}
	return &accountChar{id: id, slot: id.slot}
}

// accountChar is "account": the identifier from the identity's sources,
// read as every origin reads it (fields.Lookup), normalised (Normalizer).
// Absent: Missing. Present but unreadable one way only, or empty once
// normalised: Invalid. Known and unknown accounts are counted alike: the
// edge cannot tell them apart, and does not try.
type accountChar struct {
	id      *Identity
	slot    int
	aliases bool // account_aliases: provider aliases folded
}

// accountState is a Scratch's normaliser (Memo.State).
type accountState struct{ n Normalizer }

func (a *accountChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	m := s.Memo(a.slot)
	if !m.Done {
		a.resolve(m, req, s)
	}
	if m.Status != rules.Present {
		return buf, m.Status
	}
	return rules.AppendValue(buf, m.Value), rules.Present
}

// resolve fills m with the request's account: the first source present.
func (a *accountChar) resolve(m *rules.Memo, req *rules.Request, s *rules.Scratch) {
	st, _ := m.State.(*accountState)
	if st == nil {
		st = &accountState{} // once per Scratch
		m.State = st
	}
	m.Done, m.Status, m.Value = true, rules.Missing, m.Value[:0]
	for _, src := range a.id.Account {
		v, status := fields.Lookup(src, a.id.Account, req, s)
		if status == rules.Missing {
			continue
		}
		if status == rules.Invalid {
			m.Status = rules.Invalid
			return
		}
		var err error
		if m.Value, err = st.n.Normalize(m.Value[:0], v, a.aliases); err != nil {
			m.Status = rules.Invalid
			return
		}
		m.Status = rules.Present
		return
	}
}

// compileAliases is account_aliases = true: the rule's account
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
		c.Errorf(a.NameRange, "account_aliases without account", "account_aliases applies to rules keyed on \"account\" or counting distinct accounts")
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

var _ rules.TextCharacteristic = (*accountChar)(nil)
