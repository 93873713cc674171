package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/otp"
)

// Attack classes on the OTP routes: phone reformatting, Content-Type
// parser differentials, code guessing and SMS pumping.

// Requests per case.
const (
	contentTypeSends   = 8   // per Content-Type case: over the per-phone limit
	contentTypeGuesses = 20  // verify attempts at one code: over the per-code limit
	attackGuesses      = 100 // otp-guessing's verify attempts
)

// foreignVictim is the number bypass 1 of issue 9 texted: Russia, outside
// the shipped policy's allow list.
const foreignVictim = "+79161234567"

// noPhone skips class, and says so, when the policy reads no phone.
func (a *attackRun) noPhone(class string) bool {
	if id := otp.IdentityOf(a.m.p); id != nil && len(id.Phone) > 0 {
		return false
	}
	a.skip(class, "", fmt.Sprintf("the policy %s reads no phone (identity { phone })", a.p.policy))
	return true
}

// phoneBlock returns a numbering block no case of the run used, and ok;
// without ok, the policy reads no phone (class is skipped, and says so)
// or err says why there is none.
func (a *attackRun) phoneBlock(class string) (otpBlock, bool, error) {
	if a.noPhone(class) {
		return otpBlock{}, false, nil
	}
	b, err := a.block()
	return b, err == nil, err
}

// otpFields is a send's canonical body.
func otpFields(phone string) map[string]string { return map[string]string{"phone": phone} }

// otpCanon is POST path at -host from client for fields.
func (a *attackRun) otpCanon(path string, client netip.Addr, fields map[string]string) canonReq {
	return canonReq{method: fasthttp.MethodPost, path: path, host: a.p.host, client: a.m.counted(client), fields: fields}
}

// otpRequest is POST path from client with body of type ct ("" for no
// Content-Type header).
func (a *attackRun) otpRequest(path string, client netip.Addr, ct string, body []byte) *rawRequest {
	r := a.request(fasthttp.MethodPost, path)
	a.clientHeader(r, client)
	if ct != "" {
		r.add("Content-Type", ct)
	}
	r.body = body
	return r
}

// jsonBody marshals v; v is always marshallable.
func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a map of strings
	}
	return b
}

// phoneSpelling is one way of writing a phone number in a send's body.
type phoneSpelling struct {
	name string
	ct   string
	body []byte
}

// phoneSpellings returns ways of writing the US number e164
// ("+1NPANXXXXXX") that libphonenumber, and so an origin that normalises,
// reads as that number (docs/attacks.md).
func phoneSpellings(e164 string) []phoneSpelling {
	d := e164[2:]
	npa, exc, sub := d[:3], d[3:6], d[6:]
	js := func(name, v string) phoneSpelling {
		return phoneSpelling{name, "application/json", jsonBody(map[string]string{"phone": v})}
	}
	var fw strings.Builder
	for _, r := range e164 {
		switch {
		case r == '+':
			fw.WriteRune('\uFF0B')
		default:
			fw.WriteRune(r - '0' + '\uFF10')
		}
	}
	form := func(name, v string) phoneSpelling {
		return phoneSpelling{name, "application/x-www-form-urlencoded", []byte("phone=" + url.QueryEscape(v))}
	}
	return []phoneSpelling{
		js("e164", e164),
		js("spaces", "+1 "+npa+" "+exc+" "+sub),
		js("parentheses", "+1 ("+npa+") "+exc+"-"+sub),
		js("national-parentheses", "("+npa+") "+exc+"-"+sub),
		js("national-dashes", npa+"-"+exc+"-"+sub),
		js("national-dots", npa+"."+exc+"."+sub),
		js("national-digits", npa+exc+sub),
		js("trunk-prefix", "1"+npa+exc+sub),
		js("trunk-prefix-dashes", "1-"+npa+"-"+exc+"-"+sub),
		js("e164-dashes", "+1-"+npa+"-"+exc+"-"+sub),
		js("international-prefix-011", "011 1 "+npa+" "+exc+" "+sub),
		js("tel-uri", "tel:+1-"+npa+"-"+exc+"-"+sub),
		js("fullwidth-digits", fw.String()),
		js("padded", "  "+e164+"  "),
		js("extension", "+1 "+npa+" "+exc+" "+sub+" ext. 7"),
		{"json-number", "application/json", []byte(`{"phone":1` + npa + exc + sub + `}`)},
		form("form-e164", e164),
		form("form-national", "("+npa+") "+exc+"-"+sub),
	}
}

func phoneFormatRequests(*attackRun) int64 { return int64(len(phoneSpellings("+12025550100"))) }

// runPhoneFormat: every way of writing one number counts in one bucket
// (docs/policy.md, "Characteristics": phone). One victim, one send per
// spelling, each from a new
// client and without a cookie: no more than the per-phone limit may reach
// the origin; the note names the spellings that did.
func runPhoneFormat(a *attackRun) error {
	b, ok, err := a.phoneBlock("phone-format")
	if !ok {
		return err
	}
	victim := b.phones[a.rng.IntN(len(b.phones))]
	tc, cs, err := a.beginCast("phone-format", "", a.ownerOf(otherPhone(b, victim)))
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	var reached []string
	for _, s := range phoneSpellings(victim) {
		client := a.v6Client()
		_, _, ok, err := tc.sendTagged(c, a.otpRequest(otpSendPath, client, s.ct, s.body), a.otpCanon(otpSendPath, client, otpFields(victim)))
		if err != nil {
			return err
		}
		if ok {
			reached = append(reached, s.name)
		}
	}
	if err := tc.checkReached(int64(len(reached))); err != nil {
		return err
	}
	if err := tc.play(cs); err != nil {
		return err
	}
	tc.finish(int64(len(reached)), fmt.Sprintf("sends to %s that reached the origin, in any spelling (%s)", victim, strings.Join(reached, ", ")))
	return nil
}

// polyglot returns bypass 1's body: a JSON object whose "phone" is decoy
// and whose text, read as a form, has the fields of form (in order) as its
// real fields: {"phone":"DECOY","a":"&phone=%2B1…&b="}. An origin that
// reads it as JSON sees decoy; one that reads it as a form, form.
func polyglot(decoy map[string]string, decoyOrder []string, form [][2]string) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for _, k := range decoyOrder {
		fmt.Fprintf(&b, "%q:%q,", k, decoy[k])
	}
	b.WriteString(`"a":"`)
	for _, kv := range form {
		b.WriteString("&" + url.QueryEscape(kv[0]) + "=" + url.QueryEscape(kv[1]))
	}
	b.WriteString(`&b="}`)
	return []byte(b.String())
}

// contentTypeCases are the Content-Type values of bypass 1 and its
// neighbours (docs/attacks.md says which origins read which part).
var contentTypeCases = []string{
	"application/x-www-form-urlencoded,x",
	"application/x-www-form-urlencoded x",
	"application/x-www-form-urlencodedfoo",
	"application/x-www-form-urlencoded/",
	"application/x-www-form-urlencoded, application/json",
	"application/json, application/x-www-form-urlencoded",
	"application/x-www-form-urlencoded; charset=iso-8859-1",
	"text/plain",
	"application/octet-stream",
	"",
	"multipart/form-data",
	"application/x-www-form-urlencoded",
	"APPLICATION/X-WWW-FORM-URLENCODED; charset=UTF-8",
}

func contentTypeRequests(*attackRun) int64 {
	return int64((len(contentTypeCases)+1)*contentTypeSends + contentTypeGuesses)
}

// runContentType: the edge reads a body identity only where the origin
// cannot disagree (issue 9, item 1). Each case sends bypass 1's body under
// one Content-Type: a new decoy phone in the JSON, the victim in the form.
// The gain counts the codes the origin issued to the victim: each
// challenge the origin answered is verified directly at the origin with
// the victim's number and its code, and counts when it verifies. The
// foreign case puts a number the policy denies in the form; the verify
// case guesses at one of the victim's real codes with the guesses in the
// form.
func runContentType(a *attackRun) error {
	if a.noPhone("content-type") {
		return nil
	}
	for _, ct := range contentTypeCases {
		b, err := a.block()
		if err != nil {
			return err
		}
		victim := b.phones[a.rng.IntN(len(b.phones))]
		cs, err := a.newCast(a.ownerOf(otherPhone(b, victim)))
		if err != nil {
			return err
		}
		if err := a.contentTypeSends(ctName(ct), ct, victim, cs); err != nil {
			return err
		}
	}
	if err := a.contentTypeSends("foreign-number", contentTypeCases[0], foreignVictim, noBystanders("none: the policy refuses every send to the number outright, so they count nothing")); err != nil {
		return err
	}
	return a.contentTypeVerify(contentTypeCases[0])
}

// ctName names a Content-Type case.
func ctName(ct string) string {
	if ct == "" {
		return "none"
	}
	return strings.ReplaceAll(ct, " ", "_")
}

// contentTypeSends runs one send case: victim in the form, a new decoy in
// the JSON of each send.
func (a *attackRun) contentTypeSends(name, ct, victim string, cs *cast) error {
	tc, err := a.begin("content-type", name)
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	var challenges [][2]string // id, code
	for range contentTypeSends {
		db, err := a.block()
		if err != nil {
			return err
		}
		decoy := db.phones[a.rng.IntN(len(db.phones))]
		client := a.v6Client()
		body := polyglot(map[string]string{"phone": decoy}, []string{"phone"}, [][2]string{{"phone", victim}})
		ans, err := tc.send(c, a.otpRequest(otpSendPath, client, ct, body), a.otpCanon(otpSendPath, client, otpFields(victim)))
		if err != nil {
			return err
		}
		if id, code := otpChallenge(ans.status, ans.body); id != "" {
			challenges = append(challenges, [2]string{id, code})
		}
	}
	if _, err := tc.reachedAll(nil); err != nil {
		return err
	}
	if err := tc.play(cs); err != nil {
		return err
	}
	var gain int64
	for _, ch := range challenges {
		ok, err := a.originVerifies(victim, ch[0], ch[1])
		if err != nil {
			return err
		}
		if ok {
			gain++
		}
	}
	tc.finish(gain, fmt.Sprintf("codes the origin issued to %s (%d challenges answered, each verified at the origin)", victim, len(challenges)))
	return nil
}

// originVerifies verifies a challenge directly at the origin (not through
// the edge): whether the origin issued it to phone.
func (a *attackRun) originVerifies(phone, id, code string) (bool, error) {
	r := &rawRequest{method: fasthttp.MethodPost, target: otpVerifyPath}
	r.add("Host", a.origin.c.addr).add("Content-Type", "application/json")
	r.body = jsonBody(map[string]string{"phone": phone, "challenge_id": id, "code": code})
	ans, err := a.origin.c.do(a.ctx, r)
	if err != nil {
		return false, fmt.Errorf("verifying at the origin: %w", err)
	}
	return ans.status == fasthttp.StatusOK, nil
}

// contentTypeVerify runs the verify case: the victim's real challenge
// (asked for at the origin directly, so the edge counts no send), then
// guesses with the real challenge and a wrong code in the form and a new
// decoy challenge in the JSON. The gain is the guesses that reached the
// origin, if the origin reads this Content-Type's form: checked at the
// end by sending it the same body with the right code, directly.
func (a *attackRun) contentTypeVerify(ct string) error {
	b, err := a.block()
	if err != nil {
		return err
	}
	victim := b.phones[a.rng.IntN(len(b.phones))]
	cs, err := a.newCast(a.ownerOf(otherPhone(b, victim)))
	if err != nil {
		return err
	}
	r := &rawRequest{method: fasthttp.MethodPost, target: otpSendPath}
	r.add("Host", a.origin.c.addr).add("Content-Type", "application/json")
	r.body = jsonBody(otpFields(victim))
	ans, err := a.origin.c.do(a.ctx, r)
	if err != nil {
		return fmt.Errorf("asking the origin for a code: %w", err)
	}
	id, code := otpChallenge(ans.status, ans.body)
	if id == "" {
		return fmt.Errorf("asking the origin for a code: it answered %d", ans.status)
	}

	tc, err := a.begin("content-type", "verify-guesses")
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	for i := range contentTypeGuesses {
		db, err := a.block()
		if err != nil {
			return err
		}
		decoy := map[string]string{"phone": db.phones[0], "challenge_id": fmt.Sprintf("attacks-decoy-%d", a.rng.Uint64()), "code": "000000"}
		guess := otpGuess(a.rng.IntN(1_000_000)+i, code)
		body := polyglot(decoy, []string{"phone", "challenge_id", "code"}, [][2]string{{"phone", victim}, {"challenge_id", id}, {"code", guess}})
		client := a.v6Client()
		canon := a.otpCanon(otpVerifyPath, client, map[string]string{"phone": victim, "challenge_id": id, "code": guess})
		if _, err := tc.send(c, a.otpRequest(otpVerifyPath, client, ct, body), canon); err != nil {
			return err
		}
	}
	reached, err := tc.reachedAll(nil)
	if err != nil {
		return err
	}
	// Does the origin read this type's form? The same body with the right
	// code verifies only if it does (and consumes the code: the case is
	// over).
	decoy := map[string]string{"phone": victim, "challenge_id": "attacks-decoy", "code": "000000"}
	pr := &rawRequest{method: fasthttp.MethodPost, target: otpVerifyPath}
	pr.add("Host", a.origin.c.addr).add("Content-Type", ct)
	pr.body = polyglot(decoy, []string{"phone", "challenge_id", "code"}, [][2]string{{"phone", victim}, {"challenge_id", id}, {"code", code}})
	pans, err := a.origin.c.do(a.ctx, pr)
	if err != nil {
		return fmt.Errorf("probing the origin's reading: %w", err)
	}
	readsForm := pans.status == fasthttp.StatusOK
	gain := int64(0)
	if readsForm {
		gain = reached
	}
	if err := tc.play(cs); err != nil {
		return err
	}
	tc.finish(gain, fmt.Sprintf("guesses at %s's code that reached the origin (%d reached; the origin reads %q as the form: %v)", victim, reached, ct, readsForm))
	return nil
}

func otpGuessingAttackRequests(*attackRun) int64 { return 1 + 2*attackGuesses }

// runOTPGuessingAttack is otp-guessing (otp_guessing.go) with the
// policy's bounds: wrong guesses at one phone's codes, each from a new
// client, a new code asked for after every refusal. The verify attempts
// and the codes sent that reach the origin are each held to what the
// policy allows.
func runOTPGuessingAttack(a *attackRun) error {
	b, ok, err := a.phoneBlock("otp-guessing")
	if !ok {
		return err
	}
	phone := b.phones[a.rng.IntN(len(b.phones))]
	verify, cs, err := a.beginCast("otp-guessing", "verify-attempts", a.ownerOf(otherPhone(b, phone)))
	if err != nil {
		return err
	}
	sends := &tcase{a: a, res: caseResult{name: "otp-guessing/codes-sent", statuses: make(map[int]int64)}, before: verify.before}
	c := a.conn(netip.Addr{})
	defer c.close()
	send := func() (id, code string, err error) {
		client := a.v6Client()
		ans, err := sends.send(c, a.otpRequest(otpSendPath, client, "application/json", jsonBody(otpFields(phone))), a.otpCanon(otpSendPath, client, otpFields(phone)))
		if err != nil {
			return "", "", err
		}
		id, code = otpChallenge(ans.status, ans.body)
		return id, code, nil
	}
	id, code, err := send()
	if err != nil {
		return err
	}
	first := a.rng.IntN(1_000_000)
	for i := range attackGuesses {
		fields := map[string]string{"phone": phone, "challenge_id": id, "code": otpGuess(first+i, code)}
		client := a.v6Client()
		ans, err := verify.send(c, a.otpRequest(otpVerifyPath, client, "application/json", jsonBody(fields)), a.otpCanon(otpVerifyPath, client, fields))
		if err != nil {
			return err
		}
		if ans.status == fasthttp.StatusTooManyRequests {
			nid, ncode, err := send()
			if err != nil {
				return err
			}
			if nid != "" {
				id, code = nid, ncode
			}
		}
	}
	vg, err := verify.reachedAll(func(p string) bool { return p == otpVerifyPath })
	if err != nil {
		return err
	}
	sg, err := sends.reachedAll(func(p string) bool { return p == otpSendPath })
	if err != nil {
		return err
	}
	if err := verify.play(cs, sends); err != nil {
		return err
	}
	sends.cast = noBystanders("played with otp-guessing/verify-attempts")
	sends.cast.prior = cs.prior
	verify.finish(vg, "wrong guesses at "+phone+"'s codes that reached the origin")
	sends.finish(sg, "codes sent to "+phone)
	return nil
}

func smsPumpingRequests(a *attackRun) int64 { return otpBlockSize + int64(a.cfg.otp.foreign) }

// runSMSPumping is otp-pumping (otp_pumping.go) with the policy's bounds:
// every number of one numbering block once, then numbers of countries
// outside the allow list, each from a new client.
func runSMSPumping(a *attackRun) error {
	b, ok, err := a.phoneBlock("sms-pumping")
	if !ok {
		return err
	}
	numbers := slices.Clone(b.phones)
	// The owner of a number of the block's range that the walk does not
	// send to verified it before: walking the block fills the range (issue
	// 24, harm f), and must not lock it out. (Not one of the numbers
	// walked: a send to a known phone may pass the range rule, which the
	// gain's bound does not know.)
	owner, err := rangeMate(b)
	if err != nil {
		return err
	}
	cs, err := a.newCast(a.ownerOf(owner))
	if err != nil {
		return err
	}
	if err := a.sendsCase("sms-pumping", "one-block", numbers, "sends to "+b.rng+"…", cs); err != nil {
		return err
	}
	foreign, err := loadForeignNumbers(a.cfg.otp.phones, a.cfg.otp.foreign)
	if err != nil {
		a.skip("sms-pumping", "foreign-countries", err.Error()+" (give -phones)")
		return nil
	}
	numbers = numbers[:0]
	for _, f := range foreign {
		numbers = append(numbers, f.e164)
	}
	return a.sendsCase("sms-pumping", "foreign-countries", numbers, fmt.Sprintf("sends to %d countries' numbers", len(foreign)),
		noBystanders("none: the policy refuses every send outside its countries outright, so they count nothing"))
}

// sendsCase sends one code to each number, each from a new client, and
// counts the sends that reached the origin, then plays the cast.
func (a *attackRun) sendsCase(class, name string, numbers []string, note string, cs *cast) error {
	tc, err := a.begin(class, name)
	if err != nil {
		return err
	}
	c := a.conn(netip.Addr{})
	defer c.close()
	for _, p := range numbers {
		client := a.v6Client()
		if _, err := tc.send(c, a.otpRequest(otpSendPath, client, "application/json", jsonBody(otpFields(p))), a.otpCanon(otpSendPath, client, otpFields(p))); err != nil {
			return err
		}
	}
	return tc.end(cs, nil, note+" that reached the origin")
}

// rangeMate returns a number of b's range that is not one of b's phones:
// its 900s (b's are 555-01xx).
func rangeMate(b otpBlock) (string, error) {
	for i := range 100 {
		p, err := otp.Normalize(fmt.Sprintf("%s9%02d", b.rng, i), "")
		if err == nil && p.Range() == b.rng && otpAllowed(p.Country()) && !slices.Contains(b.phones, p.E164) {
			return p.E164, nil
		}
	}
	return "", fmt.Errorf("no number of the range %s outside its block", b.rng)
}

// otherPhone returns a number of the block b that is not victim: a phone
// owner's, in the attacked range.
func otherPhone(b otpBlock, victim string) string {
	for i := len(b.phones) - 1; i >= 0; i-- {
		if b.phones[i] != victim {
			return b.phones[i]
		}
	}
	return victim
}
