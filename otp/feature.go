package otp

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/edge-gateway/edge/fields"
	"github.com/edge-gateway/edge/rules"
)

// Feature returns the OTP feature: the identity { } block (where phone
// numbers and OTP challenge IDs come from), the phone, phone_range,
// phone_country and otp_session characteristics, and the
// phone_country_in and phone_country_not_in conditions (docs/policy.md).
func Feature() rules.Feature {
	return rules.Feature{
		Name: "otp",
		// identity { } is shared: otp decodes phone, phone_region and
		// otp_session; login decodes account.
		Blocks: []rules.BlockType{{Type: "identity", Attrs: []string{"phone", "phone_region", "otp_session"}, Decode: decodeIdentity}},
		Characteristics: []rules.CharacteristicType{
			{Name: "phone", Tag: rules.TagPhone, Compile: compilePhone(phoneE164)},
			{Name: "phone_range", Tag: rules.TagPhoneRange, Compile: compilePhone(phoneRange)},
			{Name: "phone_country", Tag: rules.TagPhoneCountry, Compile: compilePhone(phoneCountry)},
			{Name: "otp_session", Tag: rules.TagOTPSession, Compile: compileSession},
		},
		Conditions: []rules.ConditionType{
			{Name: "phone_country_in", Compile: compileCountryCond(false)},
			{Name: "phone_country_not_in", Compile: compileCountryCond(true)},
		},
	}
}

// Identity is the compiled identity { } block: each identity's sources,
// tried in order.
type Identity struct {
	Phone      []fields.Source
	OTPSession []fields.Source
	// PhoneRegion is the default region of national-format numbers
	// (default "US").
	PhoneRegion string

	phoneSlot, sessionSlot int
}

// IdentityOf returns otp's part of p's identity block, or nil without one.
func IdentityOf(p *rules.Policy) *Identity {
	for _, v := range p.Blocks("identity") {
		if id, ok := v.(*Identity); ok {
			return id
		}
	}
	return nil
}

// identityBlock is the HCL schema of identity { }.
type identityBlock struct {
	Phone       hcl.Expression `hcl:"phone,optional"`
	PhoneRegion *string        `hcl:"phone_region,optional"`
	OTPSession  hcl.Expression `hcl:"otp_session,optional"`

	PhoneRegionRange hcl.Range `hcl:"phone_region,attr_value_range"`
}

func decodeIdentity(c *rules.Compiler, b *hcl.Block) any {
	var x identityBlock
	if !c.Append(gohcl.DecodeBody(b.Body, nil, &x)) {
		return nil
	}
	id := &Identity{PhoneRegion: "US", phoneSlot: c.Slot("otp.phone"), sessionSlot: c.Slot("otp.session")}
	if x.PhoneRegion != nil {
		id.PhoneRegion = strings.ToUpper(*x.PhoneRegion)
		if !ValidRegion(id.PhoneRegion) {
			c.Errorf(x.PhoneRegionRange, "Invalid phone_region", "%q is not a region phone numbers are known for; use an ISO 3166 alpha-2 code such as \"US\"", *x.PhoneRegion)
		}
	}
	id.Phone = fields.CompileSources(c, x.Phone, "phone")
	id.OTPSession = fields.CompileSources(c, x.OTPSession, "otp_session")
	return id
}

// phoneState is a request's phone number, resolved once (Memo.State).
type phoneState struct{ phone Phone }

// resolvePhone finds the request's phone number, at most once per request:
// the first of the identity's phone sources that is present, in E.164.
// Present but not a possible number, or read two ways: Invalid.
func (id *Identity) resolvePhone(req *rules.Request, s *rules.Scratch) (*Phone, rules.Status) {
	m := s.Memo(id.phoneSlot)
	st, _ := m.State.(*phoneState)
	if st == nil {
		st = &phoneState{} // once per Scratch
		m.State = st
	}
	if m.Done {
		return &st.phone, m.Status
	}
	m.Done, m.Status = true, rules.Missing
	for _, src := range id.Phone {
		v, status := fields.Lookup(src, id.Phone, req, s)
		if status == rules.Missing {
			continue
		}
		if status == rules.Invalid {
			m.Status = rules.Invalid
			break
		}
		ph, err := Normalize(v, id.PhoneRegion)
		if err != nil {
			m.Status = rules.Invalid
			break
		}
		st.phone, m.Status = ph, rules.Present
		break
	}
	return &st.phone, m.Status
}

// maxSessionBytes caps an OTP challenge ID: a longer one is Invalid.
const maxSessionBytes = 256

// resolveSession finds the request's OTP challenge ID, at most once per
// request, into the memo's Value.
func (id *Identity) resolveSession(req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	m := s.Memo(id.sessionSlot)
	if m.Done {
		return m.Value, m.Status
	}
	m.Done, m.Status = true, rules.Missing
	for _, src := range id.OTPSession {
		v, status := fields.Lookup(src, id.OTPSession, req, s)
		if status == rules.Missing {
			continue
		}
		m.Status = status
		if status == rules.Present && len(v) > maxSessionBytes {
			m.Status = rules.Invalid
		}
		m.Value = append(m.Value[:0], v...)
		break
	}
	return m.Value, m.Status
}

// phoneView picks what a phone characteristic keys on.
type phoneView uint8

const (
	phoneE164 phoneView = iota
	phoneRange
	phoneCountry
)

func compilePhone(view phoneView) func(c *rules.Compiler, r *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
	return func(c *rules.Compiler, r *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
		id := IdentityOf(c.Policy())
		if id == nil || len(id.Phone) == 0 {
			c.Errorf(r.DefRange, "Missing identity source", "rule %q counts per phone; list where the phone comes from in identity { phone = [...] }", r.Name)
			return nil
		}
		return phoneChar{id: id, view: view}
	}
}

// phoneChar is phone (E.164), phone_range (Phone.Range) or phone_country
// (Phone.Region).
type phoneChar struct {
	id   *Identity
	view phoneView
}

func (p phoneChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	ph, st := p.id.resolvePhone(req, s)
	if st != rules.Present {
		return buf, st
	}
	switch p.view {
	case phoneRange:
		return rules.AppendValue(buf, ph.Range()), st
	case phoneCountry:
		return rules.AppendValue(buf, ph.Region), st
	}
	return rules.AppendValue(buf, ph.E164), st
}

func compileSession(c *rules.Compiler, r *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
	id := IdentityOf(c.Policy())
	if id == nil || len(id.Phone) == 0 || len(id.OTPSession) == 0 {
		c.Errorf(r.DefRange, "Missing identity source", "rule %q counts per OTP session; list the phone and otp_session sources in identity { }", r.Name)
		return nil
	}
	return sessionChar{id}
}

// sessionChar is otp_session: the phone and the challenge ID together
// (AppendSessionKey).
type sessionChar struct{ id *Identity }

func (c sessionChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	ph, st := c.id.resolvePhone(req, s)
	if st != rules.Present {
		return buf, st
	}
	sess, st := c.id.resolveSession(req, s)
	if st != rules.Present {
		return buf, st
	}
	return appendSessionKey(buf, ph.E164, sess), rules.Present
}

func compileCountryCond(not bool) func(c *rules.Compiler, r *rules.Rule, a *hcl.Attribute) rules.Condition {
	return func(c *rules.Compiler, r *rules.Rule, a *hcl.Attribute) rules.Condition {
		id := IdentityOf(c.Policy())
		if id == nil || len(id.Phone) == 0 {
			c.Errorf(a.Expr.Range(), "Missing identity source", "%s needs identity { phone = [...] }", a.Name)
		}
		list, rngs := c.StringList(a.Expr, a.Name)
		cond := &countryCond{id: id, not: not}
		for i, cc := range list {
			if len(cc) != 2 || strings.ToUpper(cc) != cc {
				c.Errorf(rngs[i], "Invalid country", "%q is not an ISO 3166 alpha-2 code such as \"US\"", cc)
				continue
			}
			cond.countries = append(cond.countries, cc)
		}
		return cond
	}
}

// countryCond is phone_country_in (not false) or phone_country_not_in (not
// true). A request without a phone meets neither (the rule does not
// apply); one whose phone is present but Invalid is Invalid, for the
// rule's invalid_identity to decide: no country can be told from garbage,
// so neither list may decide it.
type countryCond struct {
	id        *Identity
	countries []string
	not       bool
}

// String returns the condition as a policy writes it.
func (c *countryCond) String() string {
	name := "phone_country_in"
	if c.not {
		name = "phone_country_not_in"
	}
	return name + " = [" + strings.Join(c.countries, ", ") + "]"
}

func (c *countryCond) Eval(req *rules.Request, s *rules.Scratch) rules.Status {
	if c.id == nil {
		return rules.Missing
	}
	ph, st := c.id.resolvePhone(req, s)
	if st != rules.Present {
		return st
	}
	in := false
	for _, cc := range c.countries {
		if ph.Region == cc {
			in = true
			break
		}
	}
	if in == c.not {
		return rules.Missing
	}
	return rules.Present
}

// AppendText is a phone number an operator names (forgive): normalised to
// E.164 under the identity's phone_region as a request's is, then the
// characteristic's view of it.
func (p phoneChar) AppendText(buf []byte, text string, _ *rules.Policy) ([]byte, error) {
	ph, err := Normalize(text, p.id.PhoneRegion)
	if err != nil {
		return buf, err
	}
	switch p.view {
	case phoneRange:
		return rules.AppendValue(buf, ph.Range()), nil
	case phoneCountry:
		return rules.AppendValue(buf, ph.Region), nil
	}
	return rules.AppendValue(buf, ph.E164), nil
}

var _ rules.TextCharacteristic = phoneChar{}
