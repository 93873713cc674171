package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/edge-gateway/edge/otp"
	"github.com/valyala/fasthttp"
)

// Shared by the OTP scenarios of issue 5, otp-pumping (otp_pumping.go) and
// otp-guessing (otp_guessing.go). Both send to the edge and count what
// reached the origin by reading the demo origin's /__origin/hits on its own
// port (-origin) before and after the load: the origin's count, not the
// edge's answers, is what an SMS bill or a brute force is made of.
//
// They know the policy only through their flags, whose defaults are the
// numbers of testdata/fixtures/policies/otp.hcl.

// The OTP routes, as otp.hcl limits them and the demo origin serves them.
const (
	otpSendPath   = "/otp/send"
	otpVerifyPath = "/otp/verify"
)

// otpDuration is the OTP scenarios' default -duration: both take well
// under a second on loopback, and are stopped long before 30 s.
const otpDuration = 20 * time.Second

// Bounds on the OTP flags.
const (
	maxOTPAttempts = 10_000
	maxOTPForeign  = 1_000
)

// otpAllowedCountries is otp.hcl's allow list (the otp-send-countries
// rule's phone_country_not_in): numbers of these regions pass it, numbers
// of any other are denied.
var otpAllowedCountries = []string{"US", "CA", "GB"}

// otpParams are the OTP scenarios' flags.
type otpParams struct {
	rawOrigin    string // -origin as given
	origin       target // -origin, parsed by check
	phones       string // the example-numbers fixture
	rangeLimit   int64  // otp-send-per-range's limit: block sends that may reach the origin
	foreign      int    // foreign numbers otp-pumping sends to
	attempts     int    // otp-guessing's verify attempts
	phoneCeiling int64  // otp-verify-per-phone's limit: verify attempts that may reach the origin
	sendLimit    int64  // otp-send-per-phone's limit: codes that may be sent to one phone
	areaCode     int    // otp-pumping's block: its NANP area code, 0 for a random one
}

// defaultOTPParams matches testdata/fixtures/policies/otp.hcl and
// cmd/edge -demo's origin.
var defaultOTPParams = otpParams{
	rawOrigin:    "http://127.0.0.1:19000",
	phones:       "testdata/data/phones/libphonenumber-example-numbers.csv",
	rangeLimit:   5,
	foreign:      len(pumpingCountries),
	attempts:     1000,
	phoneCeiling: 15,
	sendLimit:    3,
}

// register defines the OTP flags on fs, writing into p.
func (p *otpParams) register(fs *flag.FlagSet) {
	fs.StringVar(&p.rawOrigin, "origin", p.rawOrigin, "otp-pumping, otp-guessing, attacks: base URL of the demo origin behind the edge, whose /__origin/hits is read directly; loopback only (attacks: default the policy's upstream)")
	fs.StringVar(&p.phones, "phones", p.phones, "otp-pumping: the libphonenumber example-numbers fixture, relative to the working directory")
	fs.Int64Var(&p.rangeLimit, "range-limit", p.rangeLimit, "otp-pumping: the policy's per-range send limit (otp-send-per-range), the bound on block sends reaching the origin")
	fs.IntVar(&p.foreign, "foreign-numbers", p.foreign, fmt.Sprintf("otp-pumping: numbers outside the allowed countries to send to, one per country (at most %d)", maxOTPForeign))
	fs.IntVar(&p.attempts, "attempts", p.attempts, fmt.Sprintf("otp-guessing: the guesser's verify attempts (at most %d)", maxOTPAttempts))
	fs.Int64Var(&p.phoneCeiling, "phone-ceiling", p.phoneCeiling, "otp-guessing: the policy's per-phone verify limit (otp-verify-per-phone), the bound on attempts reaching the origin")
	fs.Int64Var(&p.sendLimit, "send-limit", p.sendLimit, "otp-guessing: the policy's per-phone send limit (otp-send-per-phone), the bound on codes sent")
	fs.IntVar(&p.areaCode, "area-code", p.areaCode, "otp-pumping: the NANP area code of the block's +1 NPA 555-0100..0199 numbers (200-999, one range in an allowed country); 0 picks one at random")
}

// check reports a flag out of range, naming it, and parses -origin.
func (p *otpParams) check() error {
	switch {
	case p.rangeLimit < 0:
		return fmt.Errorf("-range-limit must not be negative, got %d", p.rangeLimit)
	case p.foreign < 1 || p.foreign > maxOTPForeign:
		return fmt.Errorf("-foreign-numbers must be in [1, %d], got %d", maxOTPForeign, p.foreign)
	case p.attempts < 1 || p.attempts > maxOTPAttempts:
		return fmt.Errorf("-attempts must be in [1, %d], got %d", maxOTPAttempts, p.attempts)
	case p.phoneCeiling < 0:
		return fmt.Errorf("-phone-ceiling must not be negative, got %d", p.phoneCeiling)
	case p.sendLimit < 0:
		return fmt.Errorf("-send-limit must not be negative, got %d", p.sendLimit)
	case p.areaCode != 0 && (p.areaCode < 200 || p.areaCode > 999):
		return fmt.Errorf("-area-code must be 0 or in [200, 999], got %d", p.areaCode)
	}
	o, err := parseFlagTarget("-origin", p.rawOrigin)
	if err != nil {
		return err
	}
	p.origin = o
	return nil
}

// otpBound is one count the policy bounds: how many requests of a kind
// were attempted through the edge, how many reached the origin, and the
// most that may.
type otpBound struct {
	what      string // "block sends"
	attempted int64
	reached   int64
	bound     int64
	source    string // where the bound comes from: "-range-limit", "the deny rule"
}

// exceeded reports whether more reached the origin than the bound allows.
func (b otpBound) exceeded() bool { return b.reached > b.bound }

// verdict renders the comparison, "ok" or "EXCEEDED by n".
func (b otpBound) verdict() string {
	if b.exceeded() {
		return fmt.Sprintf("EXCEEDED by %d", b.reached-b.bound)
	}
	return "ok"
}

// failure describes the bound's breach, "" when there is none.
func (b otpBound) failure() string {
	if !b.exceeded() {
		return ""
	}
	return fmt.Sprintf("%d of %d %s reached the origin, over the bound of %d (%s)", b.reached, b.attempted, b.what, b.bound, b.source)
}

// otpFailures lists the breaches among bounds.
func otpFailures(bounds ...otpBound) []string {
	var out []string
	for _, b := range bounds {
		if f := b.failure(); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// otpTally counts one kind of request of a run and the edge's answers.
type otpTally struct {
	sent      int64
	forwarded int64         // answers only the origin gives (a challenge, "invalid code")
	statuses  map[int]int64 // answers by status
}

func (t *otpTally) add(status int, forwarded bool) {
	t.sent++
	if forwarded {
		t.forwarded++
	}
	if t.statuses == nil {
		t.statuses = make(map[int]int64)
	}
	t.statuses[status]++
}

// writeOTPCount writes a tally and its bound, indented.
func writeOTPCount(b *strings.Builder, indent string, t otpTally, bd otpBound) {
	fmt.Fprintf(b, "%sattempted        %d\n", indent, t.sent)
	fmt.Fprintf(b, "%sanswers          %s\n", indent, otpStatuses(t.statuses))
	fmt.Fprintf(b, "%sreached origin   %-5d bound %d (%s): %s\n", indent, bd.reached, bd.bound, bd.source, bd.verdict())
}

// otpStatuses renders answers by status, "200 ×5, 429 ×95"; "none" when
// empty.
func otpStatuses(m map[int]int64) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d ×%d", s, m[s]))
	}
	return strings.Join(parts, ", ")
}

// otpHits is the demo origin's request counts by raw path.
type otpHits map[string]int64

// otpReached returns how many requests to path reached the origin between
// two readings of its counts, and an error when the counts went down (the
// origin was reset or restarted meanwhile, so the difference means
// nothing).
func otpReached(before, after otpHits, path string) (int64, error) {
	d := after[path] - before[path]
	if d < 0 {
		return 0, fmt.Errorf("the origin's count of %s went down from %d to %d during the run: it was reset or restarted; run again", path, before[path], after[path])
	}
	return d, nil
}

// otpCheckOrigin checks that the origin's count of path is consistent with
// what the run saw through the edge: at least the forwarded answers
// (answers only the origin gives) and at most the requests sent. Otherwise
// -origin is not the edge's upstream, or other traffic reached it, and the
// count cannot be compared with the bound.
func otpCheckOrigin(path string, reached, forwarded, sent int64) error {
	switch {
	case reached < forwarded:
		return fmt.Errorf("the origin counted %d requests to %s, but the edge passed on %d of the origin's answers: is -origin the edge's upstream?", reached, path, forwarded)
	case reached > sent:
		return fmt.Errorf("the origin counted %d requests to %s, more than the %d the run sent: other traffic reached it; run again on a quiet origin", reached, path, sent)
	}
	return nil
}

// otpOriginBound returns the bound check of one kind of request (what,
// limited to bound by source): how many of t's requests to path reached
// the origin between two readings of its counts (otpReached), checked
// against what the run saw through the edge (otpCheckOrigin).
func otpOriginBound(before, after otpHits, path string, t otpTally, what string, bound int64, source string) (otpBound, error) {
	reached, err := otpReached(before, after, path)
	if err != nil {
		return otpBound{}, err
	}
	if err := otpCheckOrigin(path, reached, t.forwarded, t.sent); err != nil {
		return otpBound{}, err
	}
	return otpBound{what: what, attempted: t.sent, reached: reached, bound: bound, source: source}, nil
}

// otpRun is how each OTP scenario begins: the edge answering, a client for
// the origin and one for the edge, the origin's counts before the run, the
// run's start and the client addresses it sends from.
type otpRun struct {
	origin, edge *otpClient
	before       otpHits
	start        time.Time
	addrs        *otpClientAddrs
}

// startOTPRun probes cfg.target and opens an otpRun against it and origin;
// close it when the run ends.
func startOTPRun(ctx context.Context, cfg config, origin target) (*otpRun, error) {
	if err := probe(ctx, cfg.target, cfg.timeout); err != nil {
		return nil, err
	}
	r := &otpRun{origin: newOTPClient(origin, cfg.timeout), edge: newOTPClient(cfg.target, cfg.timeout)}
	before, err := r.origin.hits(ctx)
	if err != nil {
		r.close()
		return nil, err
	}
	r.before, r.start, r.addrs = before, time.Now(), newOTPClientAddrs()
	return r, nil
}

func (r *otpRun) close() {
	r.origin.close()
	r.edge.close()
}

// otpClient speaks to one host on one connection: the edge, with a new
// X-Forwarded-For per request and no cookie, or the origin.
type otpClient struct {
	hc      *fasthttp.HostClient
	base    string
	timeout time.Duration
}

func newOTPClient(tg target, timeout time.Duration) *otpClient {
	return &otpClient{
		hc: &fasthttp.HostClient{
			Addr:                      tg.addr,
			Name:                      "edge-loadtest",
			MaxConns:                  1,
			MaxIdemponentCallAttempts: 1, // a retry would count twice at the edge
			ReadTimeout:               timeout,
			WriteTimeout:              timeout,
			DisablePathNormalizing:    true,
		},
		base:    tg.base,
		timeout: timeout,
	}
}

func (c *otpClient) close() { c.hc.CloseIdleConnections() }

// do sends method path with the JSON body (none when nil) and, when xff is
// not empty, X-Forwarded-For: xff. It never sends a cookie. It returns the
// status and the body, and fails once ctx is done.
func (c *otpClient) do(ctx context.Context, method, path string, body any, xff string) (int, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, fmt.Errorf("%s %s: the -duration budget is spent: %w", method, path, err)
	}
	timeout := c.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + path)
	req.Header.SetMethod(method)
	if xff != "" {
		req.Header.Set(fasthttp.HeaderXForwardedFor, xff)
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(b)
	}
	if err := c.hc.DoTimeout(req, resp, timeout); err != nil {
		if errors.Is(err, fasthttp.ErrTimeout) && ctx.Err() != nil {
			err = fmt.Errorf("the -duration budget is spent: %w", err)
		}
		return 0, nil, fmt.Errorf("%s %s%s: %w", method, c.base, path, err)
	}
	return resp.StatusCode(), slices.Clone(resp.Body()), nil
}

// hits reads the demo origin's counts, GET /__origin/hits, directly on its
// port (through the edge it answers 404).
func (c *otpClient) hits(ctx context.Context) (otpHits, error) {
	status, body, err := c.do(ctx, fasthttp.MethodGet, "/__origin/hits", nil, "")
	if err != nil {
		return nil, fmt.Errorf("reading the origin's hits: %w", err)
	}
	if status != fasthttp.StatusOK {
		return nil, fmt.Errorf("reading the origin's hits: GET %s/__origin/hits answered %d: is -origin the demo origin?", c.base, status)
	}
	var h otpHits
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, fmt.Errorf("reading the origin's hits: %w", err)
	}
	return h, nil
}

// otpClientAddrs hands out client addresses in turn from a random place
// in 198.18.0.0/15, new on every run, so per-client counters an earlier
// run left do not count. A run asks for fewer than maxClients, so none is
// handed out twice.
type otpClientAddrs struct{ next int }

func newOTPClientAddrs() *otpClientAddrs {
	return &otpClientAddrs{next: rand.IntN(maxClients)}
}

// peek returns the address take returns next.
func (a *otpClientAddrs) peek() string { return clientAddr(a.next % maxClients).String() }

// take returns the next address.
func (a *otpClientAddrs) take() string {
	s := a.peek()
	a.next++
	return s
}

// otpAllowed reports whether region is on the allow list.
func otpAllowed(region string) bool { return slices.Contains(otpAllowedCountries, region) }

// otpBlock is one numbering block: the fictional US numbers
// +1 NPA 555-0100 … 0199, which the edge's phone_range (E.164 without its
// last three digits) puts in one range, +1NPA5550.
type otpBlock struct {
	phones []string // E.164
	rng    string   // their phone_range
}

// otpBlockSize is how many numbers of a block otp-pumping sends to.
const otpBlockSize = 100

// pickOTPBlock returns a block in a random area code, checked with the
// edge's own normaliser (package otp): every number parses, lies in an
// allowed country (so the country rule does not refuse it and the range
// rule is the one tested) and in one range. An area code whose numbers
// fail the check is skipped. intN is rand.IntN, replaced in tests.
func pickOTPBlock(intN func(int) int) (otpBlock, error) {
	for range 1000 {
		npa := 200 + intN(800)
		b, ok := otpBlockFor(npa)
		if ok {
			return b, nil
		}
	}
	return otpBlock{}, errors.New("found no area code whose 555-01xx numbers are one range in an allowed country")
}

// otpBlockFor returns the block of area code npa, and false when one of
// its numbers is invalid, outside the allowed countries or in another
// range.
func otpBlockFor(npa int) (otpBlock, bool) {
	b := otpBlock{phones: make([]string, 0, otpBlockSize)}
	for i := range otpBlockSize {
		p, err := otp.Normalize(fmt.Sprintf("+1%03d555%04d", npa, 100+i), "")
		if err != nil || !otpAllowed(p.Country()) {
			return otpBlock{}, false
		}
		if i == 0 {
			b.rng = p.Range()
		} else if p.Range() != b.rng {
			return otpBlock{}, false
		}
		b.phones = append(b.phones, p.E164)
	}
	return b, true
}
