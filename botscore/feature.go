package botscore

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"

	"github.com/edge-gateway/edge/internal/memo"
	"github.com/edge-gateway/edge/rules"
)

// Feature returns the bot score feature: the botscore { } block (MaxMind
// databases and the hosting ASN list, opened once when the policy is
// compiled), the asn and country characteristics, and the
// bot_score_below, hosting, asn_in, country_in and country_not_in
// conditions (docs/botscore.md, docs/policy.md).
func Feature() rules.Feature {
	return rules.Feature{
		Name:   "botscore",
		Blocks: []rules.BlockType{{Type: "botscore", Decode: decodeBlock}},
		Characteristics: []rules.CharacteristicType{
			{Name: "asn", Tag: rules.TagASN, Compile: compileChar(charASN)},
			{Name: "country", Tag: rules.TagCountry, Compile: compileChar(charCountry)},
		},
		Conditions: []rules.ConditionType{
			{Name: "bot_score_below", Compile: compileScoreBelow},
			{Name: "hosting", Compile: compileHosting},
			{Name: "asn_in", Compile: compileASNIn},
			{Name: "country_in", Compile: compileCountryIn(false)},
			{Name: "country_not_in", Compile: compileCountryIn(true)},
		},
	}
}

// Config is the compiled botscore { } block: the opened databases.
type Config struct {
	Network *Network
	slot    int
}

// ConfigOf returns p's botscore block, or nil without one.
func ConfigOf(p *rules.Policy) *Config {
	c, _ := p.Block("botscore").(*Config)
	return c
}

type block struct {
	ASNDatabase       *string `hcl:"asn_database,optional"`
	CountryDatabase   *string `hcl:"country_database,optional"`
	AnonymousDatabase *string `hcl:"anonymous_database,optional"`
	HostingASNs       *string `hcl:"hosting_asns,optional"`
}

// decodeBlock opens the block's files, relative to the policy file, once:
// a missing or corrupt file is an error here, at validation, never at
// request time.
func decodeBlock(c *rules.Compiler, b *hcl.Block) any {
	var x block
	if !c.Decode(b, &x) {
		return nil
	}
	dir := filepath.Dir(c.Policy().Filename)
	path := func(s *string) string {
		if s == nil || *s == "" {
			return ""
		}
		if filepath.IsAbs(*s) {
			return *s
		}
		return filepath.Join(dir, *s)
	}
	opts := NetworkOptions{
		ASNDatabase: path(x.ASNDatabase), CountryDatabase: path(x.CountryDatabase),
		AnonymousDatabase: path(x.AnonymousDatabase), HostingASNs: path(x.HostingASNs),
	}
	n, err := OpenNetwork(opts)
	if err != nil {
		c.Errorf(b.DefRange, "Cannot open bot score data", "%v", err)
		return nil
	}
	cfg := &Config{Network: n, slot: c.Slot("botscore.result")}
	// A reload opens the files anew; the old policy's mappings go once
	// nothing can reach its Config (no request is still deciding on it).
	runtime.AddCleanup(cfg, func(n *Network) { _ = n.Close() }, n)
	return cfg
}

// state is a request's signals and score, computed once (Memo.State).
type state struct {
	net NetSignals
	req RequestSignals
	res Result
	src fieldsSource // the request's headers, as ReadRequest's source (a pointer to it: no boxing per request)
}

// rawHeaders is what the header-order signal needs beyond rules.Fields:
// the header lines as received. The gateway's fields give it; without it
// the order is not judged.
type rawHeaders interface{ RawHeaders() []byte }

// fieldsSource adapts a request's rules.Fields to HeaderSource.
type fieldsSource struct{ f rules.Fields }

var userAgent = []byte("User-Agent")

func (s *fieldsSource) UserAgent() []byte {
	if s.f == nil {
		return nil
	}
	return s.f.Header(userAgent)
}

// Header answers for Accept and the like when RawHeaders cannot (a
// request not read from the wire): ReadRequest's HeaderGetter.
func (s *fieldsSource) Header(name []byte) []byte {
	if s.f == nil {
		return nil
	}
	return s.f.Header(name)
}

func (s *fieldsSource) RawHeaders() []byte {
	if rh, ok := s.f.(rawHeaders); ok {
		return rh.RawHeaders()
	}
	return nil
}

// Result returns the request's bot score and reasons, computed at most
// once per request (the rules that need it and the gateway's
// X-Edge-Bot-Score share it). It allocates nothing once the Scratch is
// warm.
func (c *Config) Result(req *rules.Request, s *rules.Scratch) Result {
	m := s.Memo(c.slot)
	st := memo.State[state](m)
	if m.Done {
		return st.res
	}
	st.net, st.req = NetSignals{}, RequestSignals{}
	c.Network.Lookup(req.Client, &st.net)
	st.src.f = req.Fields
	ReadRequest(&st.src, &st.req)
	st.src.f = nil // the Scratch outlives the request: keep no reference to it
	st.req.JA4Mismatch = st.req.UA == UABrowser && !JA4Fits(st.req.Browser, req.JA4)
	if st.req.Claim != ClaimNone {
		st.net.VerifiedClaim = VerifiedCrawler(st.req.Claim, req.Client)
	}
	st.res = Score(&st.net, &st.req)
	m.Done, m.Status = true, rules.Present
	return st.res
}

// signals returns the request's network signals (Result computes them).
func (c *Config) signals(req *rules.Request, s *rules.Scratch) *NetSignals {
	c.Result(req, s)
	return &s.Memo(c.slot).State.(*state).net
}

func configFor(c *rules.Compiler, rng hcl.Range, what string) *Config {
	cfg := ConfigOf(c.Policy())
	if cfg == nil {
		c.Errorf(rng, "Missing botscore block", "%s needs a botscore { } block (its databases)", what)
	}
	return cfg
}

type charKind uint8

const (
	charASN charKind = iota
	charCountry
)

func compileChar(k charKind) func(c *rules.Compiler, r *rules.Rule, _ string, rng hcl.Range) rules.Characteristic {
	return func(c *rules.Compiler, r *rules.Rule, _ string, rng hcl.Range) rules.Characteristic {
		name := "asn"
		if k == charCountry {
			name = "country"
		}
		cfg := configFor(c, rng, "characteristic \""+name+"\"")
		if cfg == nil {
			return nil
		}
		return netChar{cfg: cfg, kind: k}
	}
}

// netChar is "asn" (the client's autonomous system) or "country" (its
// country): an address no database knows is Missing.
type netChar struct {
	cfg  *Config
	kind charKind
}

func (n netChar) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	sig := n.cfg.signals(req, s)
	if n.kind == charASN {
		if sig.ASN == 0 {
			return buf, rules.Missing
		}
		return binary.BigEndian.AppendUint32(buf, sig.ASN), rules.Present
	}
	if sig.Country == "" {
		return buf, rules.Missing
	}
	return rules.AppendValue(buf, sig.Country), rules.Present
}

func compileScoreBelow(c *rules.Compiler, _ *rules.Rule, a *hcl.Attribute) rules.Condition {
	cfg := configFor(c, a.NameRange, "bot_score_below")
	var n int
	if !c.Append(gohcl.DecodeExpression(a.Expr, nil, &n)) || cfg == nil {
		return nil
	}
	if n < 2 || n > 99 {
		c.Errorf(a.Expr.Range(), "Invalid bot_score_below", "bot_score_below takes a score between 2 and 99 (scores run from 1, automated, to 99, human), got %d", n)
		return nil
	}
	return scoreBelow{cfg: cfg, n: uint8(n)}
}

// scoreBelow is bot_score_below = N: the request's score is under N.
type scoreBelow struct {
	cfg *Config
	n   uint8
}

func (b scoreBelow) Eval(req *rules.Request, s *rules.Scratch) rules.Status {
	if b.cfg.Result(req, s).Score < b.n {
		return rules.Present
	}
	return rules.Missing
}

func (b scoreBelow) String() string { return "bot_score_below = " + strconv.Itoa(int(b.n)) }

func compileHosting(c *rules.Compiler, _ *rules.Rule, a *hcl.Attribute) rules.Condition {
	cfg := configFor(c, a.NameRange, "hosting")
	var want bool
	if !c.Append(gohcl.DecodeExpression(a.Expr, nil, &want)) || cfg == nil {
		return nil
	}
	return hostingCond{cfg: cfg, want: want}
}

// hostingCond is hosting = B: the client is (true) or is not (false) on a
// hosting network (hosting_asns, or the anonymous-IP database's flag).
type hostingCond struct {
	cfg  *Config
	want bool
}

func (h hostingCond) Eval(req *rules.Request, s *rules.Scratch) rules.Status {
	if h.cfg.signals(req, s).Hosting == h.want {
		return rules.Present
	}
	return rules.Missing
}

func (h hostingCond) String() string { return "hosting = " + strconv.FormatBool(h.want) }

func compileASNIn(c *rules.Compiler, _ *rules.Rule, a *hcl.Attribute) rules.Condition {
	cfg := configFor(c, a.NameRange, "asn_in")
	v, diags := a.Expr.Value(nil)
	if !c.Append(diags) || cfg == nil {
		return nil
	}
	if !v.Type().IsTupleType() && !v.Type().IsListType() {
		c.Errorf(a.Expr.Range(), "Invalid asn_in", "asn_in is a list of AS numbers, such as [15169, \"AS13335\"]")
		return nil
	}
	var list []uint32
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		n, ok := asnOf(e)
		if !ok {
			c.Errorf(a.Expr.Range(), "Invalid asn_in", "%s is not an AS number (1 to 4294967295, or \"AS\" and one)", e.GoString())
			return nil
		}
		list = append(list, n)
	}
	slices.Sort(list)
	return asnIn{cfg: cfg, asns: slices.Compact(list)}
}

func asnOf(v cty.Value) (uint32, bool) {
	if v.IsNull() || !v.IsKnown() {
		return 0, false
	}
	var s string
	switch v.Type() {
	case cty.Number:
		s = v.AsBigFloat().Text('f', -1)
	case cty.String:
		s = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(v.AsString())), "AS")
	default:
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil && n > 0
}

// asnIn is asn_in = [...]: the client's AS number is one of these.
type asnIn struct {
	cfg  *Config
	asns []uint32
}

func (a asnIn) Eval(req *rules.Request, s *rules.Scratch) rules.Status {
	if _, found := slices.BinarySearch(a.asns, a.cfg.signals(req, s).ASN); found {
		return rules.Present
	}
	return rules.Missing
}

func (a asnIn) String() string { return fmt.Sprintf("asn_in = %v", a.asns) }

func compileCountryIn(not bool) func(c *rules.Compiler, r *rules.Rule, a *hcl.Attribute) rules.Condition {
	return func(c *rules.Compiler, r *rules.Rule, a *hcl.Attribute) rules.Condition {
		cfg := configFor(c, a.NameRange, a.Name)
		list, rngs := c.StringList(a.Expr, a.Name)
		if cfg == nil {
			return nil
		}
		cond := countryIn{cfg: cfg, not: not}
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

// countryIn is country_in (not false) or country_not_in (not true) on the
// client's country. An address whose country no database knows meets
// neither: the rule does not apply to it, as a request without a phone
// meets neither phone-country condition.
type countryIn struct {
	cfg       *Config
	countries []string
	not       bool
}

func (c countryIn) Eval(req *rules.Request, s *rules.Scratch) rules.Status {
	cc := c.cfg.signals(req, s).Country
	if cc == "" {
		return rules.Missing
	}
	if slices.Contains(c.countries, cc) != c.not {
		return rules.Present
	}
	return rules.Missing
}

func (c countryIn) String() string {
	name := "country_in"
	if c.not {
		name = "country_not_in"
	}
	return name + " = [" + strings.Join(c.countries, ", ") + "]"
}
