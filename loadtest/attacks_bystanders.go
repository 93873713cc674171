package main

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/behaviour/ban"
	"github.com/edge-gateway/edge/behaviour/known"
	"github.com/edge-gateway/edge/otp"
	"github.com/edge-gateway/edge/rules"
)

// Collateral (issue 24): a defence an attacker can aim at the people it
// protects is a denial-of-service tool. Every case therefore also plays the
// bystanders its attack could hurt, real users who act as real users do on
// the routes the class attacks (log in to their own account with the right
// password, send a code to their own phone and verify it, sign up, read the
// API), and counts their requests the edge refused: the case's collateral,
// beside its gain, against a bound:
//
//   - a known user (a browser that holds a visitor cookie and logged in
//     successfully, a phone that completed a verify, before the attack),
//     whether behind the attacker's own address, the owner of a phone in the
//     attacked numbering block or of the attacked account: 0. Nothing the
//     attacker did may refuse it; only its own per-key limits hold it.
//   - a fresh user (no history: a cookie fetched by a GET just before it
//     acts), behind the attacker's address, elsewhere in the attacker's /48
//     or /24, or elsewhere entirely: the requests the policy lets the attack
//     refuse it (collateralBound). A counter keyed on something it shares
//     with the attacker (the address's per-client rules, its network, its
//     numbering range) that the attack's requests could have filled may
//     refuse it; its own visitor ID, account and phone may not, and neither
//     may a ban or the visitor mint budget, which the policy never lets
//     fall on a new visitor that did nothing (docs/attacks.md,
//     "Collateral").
//
// A refusal is counted at the client (a 400, 429 or 503 the edge answered)
// and checked at the origin: every bystander request carries its own
// X-Attack-Request tag, and one the edge refused must never have reached
// the origin, one it forwarded must have. Bystander traffic is played
// after the case's gain is read (or, for a harm that lasts only while the
// attack does, while it runs and outside the gain's paths), so it is never
// counted as the attacker's gain.

// bystanderPassword is the demo origin's one good password (demo/doc.go).
const bystanderPassword = "letmein-demo"

// bystanderPage is what a browser loads before it logs in: the first
// request the edge forwards gives it its visitor cookie (docs/policy.md,
// "known_visitors").
const bystanderPage = "/login"

// bystanderAPI is the API route a bystander reads.
const bystanderAPI = "/api/attacks-bystander"

// A bystander is a browser and sends a browser's headers, its version
// its own; the attacker's raw requests send none (an edge may tell the two
// apart by them: a mint reserve for the clients that are not minting in
// bulk, keyed on what the client sends).
const (
	bystanderAgent    = "Mozilla/5.0 (X11; Linux x86_64; rv:%d.0) Gecko/20100101 Firefox/%d.0"
	bystanderLanguage = "en-US,en;q=0.5"
)

// act is what a bystander does, a set of routes.
type act uint8

const (
	actLogin  act = 1 << iota // POST /login to its own account, the right password
	actOTP                    // POST /otp/send to its own phone, then /otp/verify with the code
	actSignup                 // POST /signup with a new inbox
	actAPI                    // GET /api/…
)

// bystanderKind is who a bystander is.
type bystanderKind uint8

const (
	// knownBehind holds a visitor cookie and logged in successfully
	// behind the attacker's address before the attack (and, on a class
	// that attacks OTP, its phone completed a verify).
	knownBehind bystanderKind = iota
	// freshBehind is a new browser behind the attacker's address: it
	// fetches its cookie by a GET just before it acts.
	freshBehind
	// neighbour is a new browser elsewhere in the attacker's network (its
	// /48 or /24), at an address the attacker does not use.
	neighbour
	// phoneOwner owns a phone of the attacked numbering block that
	// completed a verify before the attack, from an address of its own.
	phoneOwner
	// accountOwner owns the attacked account and logged in to it
	// successfully before the attack, from an address of its own.
	accountOwner
	// elsewhere is a new browser in a network the attacker never used.
	elsewhere
	// newPhone owns a phone of the attacked numbering block that never
	// completed a verify, at an address of its own.
	newPhone
)

var bystanderKindNames = [...]string{
	knownBehind: "known", freshBehind: "fresh", neighbour: "neighbour",
	phoneOwner: "phone-owner", accountOwner: "account-owner", elsewhere: "elsewhere", newPhone: "new-phone",
}

func (k bystanderKind) String() string { return bystanderKindNames[k] }

// known reports whether the kind has a history with the edge: its bound
// is 0.
func (k bystanderKind) known() bool {
	return k == knownBehind || k == phoneOwner || k == accountOwner
}

// bystander is one real user a case plays.
type bystander struct {
	kind bystanderKind
	// client is the address the policy counts it at; peer, when valid, is
	// the untrusted loopback address it connects from itself (then client
	// is peer), and otherwise this tool names client in the forwarding
	// header as the trusted proxy.
	client, peer netip.Addr
	acts         act
	account      string // its own account
	field        string // the login field it names its account in: "username" or "email"
	phone        string // its own phone
	apiPath      string // the API route it reads, "" for bystanderAPI
	cookie       string // its visitor cookie, once it has one
	agent        string // its User-Agent
	// placeholder stands for the visitor ID the policy's mint promises a
	// new browser when the edge set none (minting.go): the bound assumes
	// it, so a browser left without a cookie is held by nothing the bound
	// allows.
	placeholder string
	// noAnswer counts as refused a request the edge never answered (a
	// listener full of half-sent requests), instead of failing the run;
	// keep keeps every answer (answers), for what they say.
	noAnswer, keep bool
	answers        []rawAnswer
	// override, when set, replaces the model's bound: a class whose harm
	// the model cannot see (a key budget, a connection cap) says which of
	// the bystander's requests may be refused, and why.
	override func(r *rawRequest) (may bool, why string)

	sent, refused, bound int64
	why                  []string // the rules that may refuse it
	over                 []string // its refusals the bound does not allow
	got                  []string // what it got, for the report ("no cookie")
}

// cast is a case's bystanders: their setup before the attack, their acts
// after it, and what their requests took from the counters the attack
// shares with them.
type cast struct {
	a  *attackRun
	bs []*bystander
	// vs are the verdicts of every bystander request so far, setup and
	// acts: the fill of a counter counts them beside the attack's.
	vs []canonVerdict
	// prior is what the setup's successful requests consumed from
	// counters, before the attack began: the gain's bound starts from
	// there (caseBoundPrior).
	prior map[consKey]priorUse
	// note replaces the bystanders' line when the case has none of its own.
	note string
	// misbuilt says why the case cannot measure its collateral: a known
	// bystander meets a counter the attack could fill that the policy's
	// promise to known callers does not cover.
	misbuilt []string
}

// consKey names one counter: a role (a rule, or a rule's IP ceiling) and a
// key.
type consKey struct {
	role int
	key  rules.Key
}

// priorUse is what requests before a case consumed from one counter.
type priorUse struct {
	n  int64
	at time.Time // the first of them
}

// noBystanders is the cast of a case whose harm is played by another (a
// companion line) or that no bystander can meet.
func noBystanders(why string) *cast { return &cast{note: why} }

// newCast returns a case's bystanders, after setting up the known ones:
// each fetches its cookie from an address of its own (a browser got its
// cookie long before; fetching it behind the attacker's address would
// spend that address's mint budget, which some classes measure), then logs
// in successfully from its address, and, when it acts on OTP, has a code
// sent to its phone and verifies it. Call it before the case begins: the
// setup is no part of the gain.
func (a *attackRun) newCast(bs ...*bystander) (*cast, error) {
	cs := &cast{a: a, prior: make(map[consKey]priorUse)}
	if err := cs.add(bs...); err != nil {
		return nil, err
	}
	return cs, nil
}

// beginCast sets up the bystanders bs (newCast), then begins the case:
// the setup is no part of its gain.
func (a *attackRun) beginCast(class, name string, bs ...*bystander) (*tcase, *cast, error) {
	cs, err := a.newCast(bs...)
	if err != nil {
		return nil, nil, err
	}
	tc, err := a.begin(class, name)
	return tc, cs, err
}

// beginAround is beginCast with castAround's bystanders.
func (a *attackRun) beginAround(class, name string, client, other netip.Addr, knownActs, freshActs act) (*tcase, *cast, error) {
	cs, err := a.castAround(client, other, knownActs, freshActs)
	if err != nil {
		return nil, nil, err
	}
	tc, err := a.begin(class, name)
	return tc, cs, err
}

// add adds bystanders to the cast, setting up the known ones.
func (cs *cast) add(bs ...*bystander) error {
	for _, b := range bs {
		cs.bs = append(cs.bs, b)
		if b.kind.known() {
			if err := cs.setup(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// setup makes a known bystander known.
func (cs *cast) setup(b *bystander) error {
	a := cs.a
	// Its cookie, from its home network: as from there, not through its
	// own address.
	home := *b
	home.client, home.peer = a.v6Client(), netip.Addr{}
	c := a.conn(netip.Addr{})
	r := home.request(a, fasthttp.MethodGet, bystanderPage)
	b.agent = home.agent
	ans, err := cs.setupSend(c, r, nil)
	c.close()
	if err != nil {
		return err
	}
	if ans.cookie == "" && a.cookie != "" {
		return fmt.Errorf("bystander %s: the edge set no visitor cookie on its first page from a new address (%d)", b.kind, ans.status)
	}
	b.cookie = ans.cookie
	c = b.conn(a)
	defer c.close()
	if b.kind != phoneOwner || b.acts&actLogin != 0 {
		r, canon := b.login(a)
		ans, err := cs.setupSend(c, r, &canon)
		if err != nil {
			return err
		}
		if ans.status != fasthttp.StatusOK {
			return fmt.Errorf("bystander %s: its login before the attack got %d, not 200: the node is not fresh (counters an earlier run left), or the policy refuses a first login", b.kind, ans.status)
		}
	}
	if b.acts&actOTP != 0 {
		r, canon := b.send(a)
		ans, err := cs.setupSend(c, r, &canon)
		if err != nil {
			return err
		}
		id, code := otpChallenge(ans.status, ans.body)
		if id == "" {
			return fmt.Errorf("bystander %s: its code before the attack got %d and no challenge", b.kind, ans.status)
		}
		r, canon = b.verify(a, id, code)
		if ans, err = cs.setupSend(c, r, &canon); err != nil {
			return err
		}
		if ans.status != fasthttp.StatusOK {
			return fmt.Errorf("bystander %s: its verify before the attack got %d, not 200", b.kind, ans.status)
		}
	}
	return nil
}

// setupSend sends one setup request and records what it took from the
// counters (canon nil: a request no rule counts).
func (cs *cast) setupSend(c *rawConn, r *rawRequest, canon *canonReq) (rawAnswer, error) {
	a := cs.a
	at := time.Now()
	ans, err := c.do(a.ctx, r)
	if err != nil {
		return rawAnswer{}, fmt.Errorf("a bystander's setup: %w", err)
	}
	a.sent++
	if canon == nil {
		return ans, nil
	}
	v, err := a.m.decide(*canon)
	if err != nil {
		return rawAnswer{}, err
	}
	cs.vs = append(cs.vs, v)
	if ans.status != fasthttp.StatusOK {
		return ans, nil
	}
	for _, con := range v.cons {
		if !a.consumesOnSuccess(con.role) {
			continue
		}
		k := consKey{con.role, con.key}
		u := cs.prior[k]
		if u.n == 0 {
			u.at = at
		}
		u.n += con.op.Cost
		cs.prior[k] = u
	}
	return ans, nil
}

// consumesOnSuccess reports whether a request the origin answered with
// success stays counted on a role: rules that count requests or attempts
// keep it (the IP ceiling of a visitor rule as its rule does); failure
// rules give it back, and a rule with reset_on_success clears the key.
func (a *attackRun) consumesOnSuccess(role int) bool {
	if role < 0 {
		return false
	}
	r := a.m.p.Rules[roleRule(role)]
	return r.Count != rules.CountFailures && !r.ResetOnSuccess
}

// conn opens the bystander's connection to the edge.
func (b *bystander) conn(a *attackRun) *rawConn { return a.conn(b.peer) }

// request is a request of the bystander's: with its cookie, from its
// address.
func (b *bystander) request(a *attackRun, method, target string) *rawRequest {
	r := a.request(method, target)
	if !b.peer.IsValid() {
		a.clientHeader(r, b.client)
	}
	if b.agent == "" {
		v := 100 + a.rng.IntN(50)
		b.agent = fmt.Sprintf(bystanderAgent, v, v)
	}
	r.add("User-Agent", b.agent).add("Accept-Language", bystanderLanguage)
	if b.cookie != "" {
		r.add("Cookie", a.cookie+"="+b.cookie)
	}
	return r
}

// canon is the canonical form of a bystander's request: as sent, from
// the client the policy counts, with the visitor ID it holds (or the one
// the mint promises it).
func (b *bystander) canon(a *attackRun, path string, fields map[string]string) canonReq {
	c := canonReq{method: fasthttp.MethodPost, path: path, host: a.p.host, client: a.m.counted(b.client), fields: fields, visitor: b.cookie}
	if c.visitor == "" {
		c.visitor = b.placeholder
	}
	return c
}

// jsonPost is a POST of fields as JSON.
func (b *bystander) jsonPost(a *attackRun, path string, fields map[string]string) (*rawRequest, canonReq) {
	r := b.request(a, fasthttp.MethodPost, path)
	r.add("Content-Type", "application/json")
	r.body = jsonBody(fields)
	return r, b.canon(a, path, fields)
}

func (b *bystander) login(a *attackRun) (*rawRequest, canonReq) {
	return b.jsonPost(a, "/login", map[string]string{b.field: b.account, "password": bystanderPassword})
}

func (b *bystander) send(a *attackRun) (*rawRequest, canonReq) {
	return b.jsonPost(a, otpSendPath, otpFields(b.phone))
}

func (b *bystander) verify(a *attackRun, id, code string) (*rawRequest, canonReq) {
	return b.jsonPost(a, otpVerifyPath, map[string]string{"phone": b.phone, "challenge_id": id, "code": code})
}

func (b *bystander) signup(a *attackRun) (*rawRequest, canonReq) {
	return b.jsonPost(a, "/signup", map[string]string{"email": a.email()})
}

// Bystanders, by kind. A known one's account is new to the run, its
// phone a number no case uses (ownPhone).

// knownAt is a known browser at client (peer: connecting from it
// itself), acting on acts.
func (a *attackRun) knownAt(client, peer netip.Addr, acts act) (*bystander, error) {
	return a.newBystander(knownBehind, client, peer, acts)
}

// freshAt is a new browser at client (or in kind's place: neighbour,
// elsewhere), acting on acts.
func (a *attackRun) freshAt(kind bystanderKind, client, peer netip.Addr, acts act) (*bystander, error) {
	return a.newBystander(kind, client, peer, acts)
}

// newBystander is a bystander of kind at client with an account of its
// own, and a phone of its own when it acts on OTP; one without a history
// stands for the visitor ID the mint promises it by a placeholder.
func (a *attackRun) newBystander(kind bystanderKind, client, peer netip.Addr, acts act) (*bystander, error) {
	b := &bystander{kind: kind, client: client, peer: peer, acts: acts, account: a.account(kind.String()), field: "username"}
	if !kind.known() {
		b.placeholder = a.tag() + "-promised-visitor"
	}
	if acts&actOTP != 0 {
		p, err := a.ownPhone()
		if err != nil {
			return nil, err
		}
		b.phone = p
	}
	return b, nil
}

// ownerOf is the owner of phone, a phone of the attacked block, at an
// address of its own.
func (a *attackRun) ownerOf(phone string) *bystander {
	return &bystander{kind: phoneOwner, client: a.v6Client(), acts: actOTP, phone: phone}
}

// ownerOfAccount is the attacked account's owner, logging in by field
// ("username" or "email"), at an address of its own.
func (a *attackRun) ownerOfAccount(account, field string) *bystander {
	return &bystander{kind: accountOwner, client: a.v6Client(), acts: actLogin, account: account, field: field}
}

// ownPhone returns a US number no case of the run uses: the suite's
// blocks are 555-01xx (otpBlockFor), these a random exchange of a random
// area code, one range each.
func (a *attackRun) ownPhone() (string, error) {
	for range 1000 {
		nxx := 200 + a.rng.IntN(800)
		if nxx == 555 {
			continue
		}
		raw := fmt.Sprintf("+1%03d%03d%04d", 200+a.rng.IntN(800), nxx, a.rng.IntN(10000))
		p, err := otp.Normalize(raw, "")
		if err != nil || !otpAllowed(p.Country()) {
			continue
		}
		if a.phones[p.E164] || a.ranges[p.Range()] {
			continue
		}
		a.phones[p.E164] = true
		a.ranges[p.Range()] = true
		return p.E164, nil
	}
	return "", errors.New("found no unused US or Canadian number")
}

// play plays the bystanders' acts, after the attack's gain is read (or
// while the attack holds its harm), and records the case's collateral:
// what the edge refused them, against what the policy lets the attack
// refuse them. The attack's verdicts are tc's and also's.
func (tc *tcase) play(cs *cast, also ...*tcase) error {
	tc.cast = cs
	if len(cs.bs) == 0 {
		return nil
	}
	a := tc.a
	attack := slices.Clone(tc.verdicts)
	for _, o := range also {
		attack = append(attack, o.verdicts...)
	}
	before, err := a.origin.hits(a.ctx)
	if err != nil {
		return err
	}
	var reached int64
	for _, b := range cs.bs {
		n, err := cs.act(b, attack)
		if err != nil {
			return fmt.Errorf("%s: bystander %s: %w", tc.res.name, b.kind, err)
		}
		reached += n
	}
	after, err := a.origin.hits(a.ctx)
	if err != nil {
		return err
	}
	n, err := hitsDelta(before, after, nil)
	if err != nil {
		return err
	}
	if n != reached {
		return fmt.Errorf("%s: the origin counted %d requests while the bystanders acted, who saw %d of theirs arrive: other traffic reached it; run again on a quiet node", tc.res.name, n, reached)
	}
	if len(cs.misbuilt) > 0 {
		return fmt.Errorf("%s cannot measure its collateral: %s; a known user may be refused only by network and range rules, from which the policy exempts known callers",
			tc.res.name, strings.Join(cs.misbuilt, "; "))
	}
	return nil
}

// act plays one bystander: a fresh one fetches its cookie first, then
// each of its acts; it returns how many of its requests reached the
// origin.
func (cs *cast) act(b *bystander, attack []canonVerdict) (int64, error) {
	a := cs.a
	c := b.conn(a)
	defer c.close()
	var reached int64
	do := func(r *rawRequest, canon *canonReq) (rawAnswer, bool, error) {
		ans, ok, err := cs.actSend(b, c, r, canon, attack)
		if ok {
			reached++
		}
		return ans, ok, err
	}
	if !b.kind.known() {
		ans, ok, err := do(b.request(a, fasthttp.MethodGet, bystanderPage), nil)
		if err != nil {
			return reached, err
		}
		if ans.cookie != "" {
			b.cookie = ans.cookie
		} else if a.cookie != "" && ok {
			b.got = append(b.got, "no visitor cookie on its first page")
		}
	}
	if b.acts&actLogin != 0 {
		r, canon := b.login(a)
		if _, _, err := do(r, &canon); err != nil {
			return reached, err
		}
	}
	if b.acts&actOTP != 0 {
		r, canon := b.send(a)
		ans, ok, err := do(r, &canon)
		if err != nil {
			return reached, err
		}
		// A user whose code never came cannot verify it.
		if id, code := otpChallenge(ans.status, ans.body); ok && id != "" {
			r, canon := b.verify(a, id, code)
			if _, _, err := do(r, &canon); err != nil {
				return reached, err
			}
		}
	}
	if b.acts&actSignup != 0 {
		r, canon := b.signup(a)
		if _, _, err := do(r, &canon); err != nil {
			return reached, err
		}
	}
	if b.acts&actAPI != 0 {
		path := b.apiPath
		if path == "" {
			path = bystanderAPI
		}
		r := b.request(a, fasthttp.MethodGet, path)
		canon := b.canon(a, path, nil)
		canon.method = fasthttp.MethodGet
		if _, _, err := do(r, &canon); err != nil {
			return reached, err
		}
	}
	return reached, nil
}

// actSend sends one of a bystander's acts, tagged, and counts it: refused
// when the edge answered it without forwarding it. It returns whether the
// request reached the origin.
func (cs *cast) actSend(b *bystander, c *rawConn, r *rawRequest, canon *canonReq, attack []canonVerdict) (rawAnswer, bool, error) {
	a := cs.a
	r.tag = a.tag()
	var v canonVerdict
	if canon != nil {
		var err error
		if v, err = a.m.decide(*canon); err != nil {
			return rawAnswer{}, false, err
		}
	}
	may, why := cs.mayRefuse(v, attack, b)
	if b.override != nil {
		may, why = b.override(r)
	}
	if canon != nil {
		cs.vs = append(cs.vs, v)
	}
	b.sent++
	if may {
		b.bound++
		if why != "" && !slices.Contains(b.why, why) {
			b.why = append(b.why, why)
		}
	}
	ans, err := c.do(a.ctx, r)
	if err != nil {
		if !b.noAnswer {
			return rawAnswer{}, false, err
		}
		a.sent++
		b.refused++
		if !may {
			b.over = append(b.over, r.method+" "+r.target+": no answer")
		}
		return rawAnswer{}, false, nil
	}
	a.sent++
	if b.keep {
		b.answers = append(b.answers, ans)
	}
	_, ok, err := a.origin.reached(a.ctx, r.tag)
	if err != nil {
		return rawAnswer{}, false, err
	}
	refusal := ans.status == fasthttp.StatusBadRequest || ans.status == fasthttp.StatusForbidden ||
		ans.status == fasthttp.StatusTooManyRequests || ans.status == fasthttp.StatusServiceUnavailable
	switch {
	case ok:
		return ans, true, nil
	case !refusal:
		return rawAnswer{}, false, fmt.Errorf("%s %s: the edge answered %d without forwarding it: neither served nor refused", r.method, r.target, ans.status)
	}
	b.refused++
	if !may {
		b.over = append(b.over, fmt.Sprintf("%s %s: %d", r.method, r.target, ans.status))
	}
	return ans, false, nil
}

// mayRefuse reports whether the policy lets the attack refuse a
// bystander's request whose verdict is v, and by which rule: a counter it
// meets that every request before it on that counter (the attack's and
// the bystanders') could have filled. The counter is full at most when
// they reach its allowance over no time at all (a bucket's burst, a
// window's limit), and a count_distinct counter when they brought its
// limit of values and the request brings another: the generous test, so
// that a bound never claims a request safe that the attack could have
// refused. A known bystander may be refused by nothing: a counter it meets
// that the attack could fill must be one from which the policy exempts
// known callers (exemptsKnown); any other is a case that cannot measure.
func (cs *cast) mayRefuse(v canonVerdict, attack []canonVerdict, b *bystander) (bool, string) {
	if v.refused {
		return !b.kind.known(), v.why
	}
	now := time.Now()
	before := [][]canonVerdict{attack, cs.vs}
	for _, con := range v.cons {
		var n int64
		for _, vs := range before {
			for _, o := range vs {
				if o.refused {
					continue
				}
				for _, oc := range o.cons {
					if oc.role == con.role && oc.key == con.key {
						n += oc.op.Cost
					}
				}
			}
		}
		if n >= allowance(con.op, now, now) && cs.refuses(b, con, fmt.Sprintf("%d requests on it", n)) {
			return true, con.name
		}
	}
	for _, con := range v.distinct {
		values := make(map[uint64]bool)
		for _, vs := range before {
			for _, o := range vs {
				for _, oc := range o.distinct {
					if oc.role == con.role && oc.key == con.key {
						values[oc.op.Member] = true
					}
				}
			}
		}
		if !values[con.op.Member] && int64(len(values)) >= con.op.Limit && cs.refuses(b, con, fmt.Sprintf("%d values on it", len(values))) {
			return true, con.name
		}
	}
	return false, ""
}

// refuses reports whether a counter the attack could have filled may
// refuse the bystander: a fresh one, yes; a known one, never, and a
// counter the policy's promise to known callers does not cover makes the
// case unable to measure (misbuilt).
func (cs *cast) refuses(b *bystander, con constraint, fill string) bool {
	if !b.kind.known() {
		return true
	}
	if !cs.a.exemptsKnown(con.role) {
		cs.misbuilt = append(cs.misbuilt, fmt.Sprintf("%s could be filled by the attack (%s), and a known user's request meets it", con.name, fill))
	}
	return false
}

// exemptsKnown reports whether the policy's promise to known callers
// covers a role: a network rule (keyed on "ip" at a prefix wider than the
// policy's client prefix), a range rule (keyed on phone_range) and a rule
// with a ban (the credential-stuffing rule, whose count a known browser's
// login to its own account does not join), from which a known visitor or
// phone is exempt when it did not trip it itself (issue 24, "Known callers
// keep working"), and a rule with known_visitors, which never holds a
// visitor that logged in to the account.
func (a *attackRun) exemptsKnown(role int) bool {
	if role < 0 || roleCeiling(role) {
		return false
	}
	r := a.m.p.Rules[roleRule(role)]
	return a.networkRole(role) || slices.Contains(r.KeyNames, "phone_range") || known.Visitors(r) > 0 || ban.Duration(r) > 0
}

// networkRole reports whether a role is a network rule's: keyed on "ip"
// at a prefix wider than the policy's client prefix.
func (a *attackRun) networkRole(role int) bool {
	if role < 0 || roleCeiling(role) {
		return false
	}
	r := a.m.p.Rules[roleRule(role)]
	return slices.Contains(r.KeyNames, "ip") && (r.IPv4Prefix < a.m.p.IPv4Prefix || r.IPv6Prefix < a.m.p.IPv6Prefix)
}

// collateralResult is a case's collateral: its bystanders' requests the
// edge refused, and how many of them the policy lets the attack refuse.
type collateralResult struct {
	refused, bound int64
	breach         bool
	lines          []string
}

// collateral sums up the cast: the bystanders' refusals and bounds, and
// a breach when any of them was refused a request its bound does not
// allow (the sums alone could hide a known user refused beside a fresh
// one that the policy let through).
func (cs *cast) collateral() collateralResult {
	var r collateralResult
	if cs == nil {
		r.lines = []string{"no bystanders played"}
		return r
	}
	if len(cs.bs) == 0 {
		r.lines = []string{cs.note}
		return r
	}
	for _, b := range cs.bs {
		r.refused += b.refused
		r.bound += b.bound
		var w strings.Builder
		fmt.Fprintf(&w, "%s: %d of %d refused, bound %d", b.kind, b.refused, b.sent, b.bound)
		if len(b.why) > 0 {
			fmt.Fprintf(&w, " (%s)", strings.Join(b.why, ", "))
		}
		if len(b.got) > 0 {
			fmt.Fprintf(&w, "; %s", strings.Join(b.got, ", "))
		}
		if len(b.over) > 0 {
			r.breach = true
			fmt.Fprintf(&w, "; refused beyond its bound: %s", strings.Join(b.over, ", "))
		}
		r.lines = append(r.lines, w.String())
	}
	r.breach = r.breach || r.refused > r.bound
	return r
}
