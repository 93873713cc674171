package otp

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/fields"
	"github.com/edge-gateway/edge/internal/memo"
	"github.com/edge-gateway/edge/login"
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
		Blocks: []rules.BlockType{{
			Type: "identity", Attrs: []string{"phone", "phone_region", "otp_session"}, Identities: []string{"phone", "otp_session"},
			Decode: decodeIdentity,
		}},
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
// in the order listed. Every source present counts (docs/policy.md,
// "identity { }"): sources that disagree give a request several phones
// or challenge IDs, each counted, unless on_conflict is "reject".
type Identity struct {
	Phone      []fields.Source
	OTPSession []fields.Source
	// PhoneRegion is the default region of national-format numbers
	// (default "US").
	PhoneRegion string

	phoneSlot, sessionSlot         int
	phoneConflict, sessionConflict rules.Conflict
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
	if !c.Decode(b, &x) {
		return nil
	}
	id := &Identity{PhoneRegion: "US", phoneSlot: c.Slot("otp.phone"), sessionSlot: c.Slot("otp.session"),
		phoneConflict: c.OnConflict("phone"), sessionConflict: c.OnConflict("otp_session")}
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

// phoneState is a request's phone numbers, resolved once (Memo.State):
// the distinct ones, in the order of their sources.
type phoneState struct {
	phones []Phone
	region string
}

// Add normalises v to E.164 and keeps it unless the number is kept
// already (fields.Normal); false when v is not a possible number.
func (st *phoneState) Add(v string) bool {
	ph, err := Normalize(v, st.region)
	if err != nil {
		return false
	}
	for i := range st.phones {
		if st.phones[i].E164 == ph.E164 {
			return true
		}
	}
	st.phones = append(st.phones, ph)
	return true
}

// Len returns the number of distinct phones kept (fields.Normal).
func (st *phoneState) Len() int { return len(st.phones) }

// Reset forgets the request before's phones (fields.Normal).
func (st *phoneState) Reset() { st.phones = st.phones[:0] }

// resolvePhone finds the request's phone numbers, at most once per
// request: every phone source present, in E.164 (fields.Resolve). Present
// but not a possible number, or read two ways: Invalid.
func (id *Identity) resolvePhone(req *rules.Request, s *rules.Scratch) (*phoneState, rules.Status) {
	m := s.Memo(id.phoneSlot)
	st := memo.State[phoneState](m)
	st.region = id.PhoneRegion
	return st, fields.ResolveOnce(m, id.Phone, id.phoneConflict, st, req, s)
}

// maxSessionBytes caps an OTP challenge ID: a longer one is Invalid.
const maxSessionBytes = 256

// sessionState is a request's OTP challenge IDs, resolved once
// (Memo.State): the distinct ones, normalised as accounts are
// (login.Normalizer).
type sessionState struct {
	n    login.Normalizer
	vals fields.Values
}

// Add keeps the challenge ID v, normalised, unless kept already
// (fields.Normal): an origin that finds the challenge in a case- or
// accent-insensitive column (MySQL 8's default utf8mb4_0900_ai_ci, SQL
// Server's _CI_AI) reads "AbC123", "abc123" and "ＡＢＣ123" as one
// challenge, so they are one budget of guesses. False when v is over
// maxSessionBytes or not an identifier (login.ErrInvalidAccount: empty,
// not UTF-8, a control character).
func (st *sessionState) Add(v string) bool {
	if len(v) > maxSessionBytes {
		return false
	}
	out, err := st.n.Normalize(st.vals.Tail(), v, false)
	if err != nil {
		st.vals.Drop(out)
		return false
	}
	st.vals.Keep(out)
	return true
}

// Len returns the number of distinct challenge IDs kept (fields.Normal).
func (st *sessionState) Len() int { return st.vals.Len() }

// Reset forgets the request before's challenge IDs (fields.Normal).
func (st *sessionState) Reset() { st.vals.Reset() }

// resolveSession finds the request's OTP challenge IDs, at most once per
// request: every otp_session source present (fields.Resolve).
func (id *Identity) resolveSession(req *rules.Request, s *rules.Scratch) (*sessionState, rules.Status) {
	m := s.Memo(id.sessionSlot)
	st := memo.State[sessionState](m)
	return st, fields.ResolveOnce(m, id.OTPSession, id.sessionConflict, st, req, s)
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
// (Phone.Region). A request whose phone sources give several numbers has
// a value for each distinct view of them: two numbers of one block are
// one phone_range (rules.MultiCharacteristic).
type phoneChar struct {
	id   *Identity
	view phoneView
}

// of returns ph as the characteristic's view of it.
func (v phoneView) of(ph *Phone) string {
	switch v {
	case phoneRange:
		return ph.Range()
	case phoneCountry:
		return ph.Region
	}
	return ph.E164
}

// at returns the i-th distinct view of the phones (false past the last).
func (v phoneView) at(phones []Phone, i int) (string, bool) {
	for j := range phones {
		val := v.of(&phones[j])
		seen := false
		for k := range j {
			if v.of(&phones[k]) == val {
				seen = true
				break
			}
		}
		if seen {
			continue
		}
		if i == 0 {
			return val, true
		}
		i--
	}
	return "", false
}

func (p phoneChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	return p.AppendValueAt(buf, 0, req, s)
}

// MaxValues returns the most phones a request can carry: its phone
// sources that can be present together.
func (p phoneChar) MaxValues() int { return fields.MaxValues(p.id.Phone) }

// Values returns how many distinct values of the view the request's
// phones give.
func (p phoneChar) Values(req *rules.Request, s *rules.Scratch) int {
	st, _ := p.id.resolvePhone(req, s)
	n := 0
	for {
		if _, ok := p.view.at(st.phones, n); !ok {
			return max(n, 1)
		}
		n++
	}
}

// AppendValueAt appends the i-th distinct value of the view.
func (p phoneChar) AppendValueAt(buf []byte, i int, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	st, status := p.id.resolvePhone(req, s)
	if status != rules.Present {
		return buf, status
	}
	v, ok := p.view.at(st.phones, i)
	if !ok {
		return buf, rules.Invalid
	}
	return rules.AppendValue(buf, v), rules.Present
}

func compileSession(c *rules.Compiler, r *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
	id := IdentityOf(c.Policy())
	if id == nil || len(id.OTPSession) == 0 {
		c.Errorf(r.DefRange, "Missing identity source", "rule %q counts per OTP session; list where the challenge ID comes from in identity { otp_session = [...] }", r.Name)
		return nil
	}
	return sessionChar{id}
}

// sessionChar is otp_session: the challenge ID alone (AppendSessionKey),
// so an origin that finds a challenge by its ID gives no fresh budget per
// phone number written beside it, normalised as an account is
// (sessionState.Add), so no spelling of the ID gets a budget of its own. Several IDs in one request are each
// counted (rules.MultiCharacteristic).
type sessionChar struct{ id *Identity }

func (c sessionChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	return c.AppendValueAt(buf, 0, req, s)
}

// MaxValues returns the most challenge IDs a request can carry.
func (c sessionChar) MaxValues() int { return fields.MaxValues(c.id.OTPSession) }

// Values returns how many distinct challenge IDs the request carries.
func (c sessionChar) Values(req *rules.Request, s *rules.Scratch) int {
	st, _ := c.id.resolveSession(req, s)
	return max(st.vals.Len(), 1)
}

// AppendValueAt appends the i-th distinct challenge ID's key.
func (c sessionChar) AppendValueAt(buf []byte, i int, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	st, status := c.id.resolveSession(req, s)
	if status != rules.Present || i >= st.vals.Len() {
		return buf, status
	}
	return appendSessionKey(buf, st.vals.At(i)), rules.Present
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
// so neither list may decide it. With several phones, Eval holds when the
// condition holds for some phone (a rule that limits or denies applies:
// the origin may text any of them) and EvalEvery when it holds for every
// one (an exemption applies only then: rules.EveryCondition).
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
	return c.eval(req, s, false)
}

// EvalEvery reports whether the condition holds for every phone.
func (c *countryCond) EvalEvery(req *rules.Request, s *rules.Scratch) rules.Status {
	return c.eval(req, s, true)
}

func (c *countryCond) eval(req *rules.Request, s *rules.Scratch, every bool) rules.Status {
	if c.id == nil {
		return rules.Missing
	}
	st, status := c.id.resolvePhone(req, s)
	if status != rules.Present {
		return status
	}
	for i := range st.phones {
		if c.holds(&st.phones[i]) != every {
			// Some phone decides: one that holds (some), or one that
			// does not (every).
			if every {
				return rules.Missing
			}
			return rules.Present
		}
	}
	if every {
		return rules.Present
	}
	return rules.Missing
}

// holds reports whether the condition holds for ph.
func (c *countryCond) holds(ph *Phone) bool {
	in := false
	for _, cc := range c.countries {
		if ph.Region == cc {
			in = true
			break
		}
	}
	return in != c.not
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

var (
	_ rules.TextCharacteristic  = phoneChar{}
	_ rules.MultiCharacteristic = phoneChar{}
	_ rules.MultiCharacteristic = sessionChar{}
	_ rules.EveryCondition      = (*countryCond)(nil)
)
