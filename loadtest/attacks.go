package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/node"
)

// The attacks scenario (issue 9): every attack class the edge must hold
// against, run in turn against one node on this machine, each reporting
// the attacker's gain (what reached the origin, counted by the demo
// origin's /__origin/hits and /__origin/last) beside the policy's bound
// for it, computed from the policy file the node serves (attacks_model.go).
// Every case also plays the bystanders its attack could hurt
// (attacks_bystanders.go) and counts their requests the edge refused, its
// collateral, against the bound the policy promises them. One line per
// case:
//
//	attack: CLASS/CASE gain=N bound=M collateral=N bound=M ok|BREACH
//
// and the run exits 1 on any breach of either. docs/attacks.md describes each class,
// why each spelling is one an origin could read as the protected request,
// and how each bound follows from the policy.

// Defaults and bounds of the attacks flags.
const (
	attacksDuration = 5 * time.Minute
	attacksRequests = 400_000
	// attacksFloodTenths is the key flood's size in tenths of the memory
	// store's max_keys, rounded up: the 110,000 for 100,000.
	attacksFloodTenths = 11
	// attacksFloodConns is how many connections the key flood uses.
	attacksFloodConns = 16
	// attackHost is the default -host.
	attackHost = "login.example.com"
)

// attackParams are the attacks scenario's flags.
type attackParams struct {
	policy    string        // -policy: the policy file the node serves
	host      string        // -host: the Host every request names
	classes   string        // -classes: comma-separated, "" for all
	flood     int           // -flood: key-flood requests, 0 for max_keys × 1.1
	leaseWait time.Duration // -lease-wait: the longest in-flight waits for a lease to end
	slowloris int           // -slowloris: slowloris's connections, 0 for the listener's cap + 50
	originSet bool          // -origin was given (otherwise the policy's upstream)
}

var defaultAttackParams = attackParams{policy: "policies.hcl", host: attackHost, leaseWait: defaultLeaseWait}

// register defines the attacks flags on fs, writing into p.
func (p *attackParams) register(fs *flag.FlagSet) {
	fs.StringVar(&p.policy, "policy", p.policy, "attacks: the policy file the node serves, relative to the working directory; every bound is computed from it")
	fs.StringVar(&p.host, "host", p.host, "attacks: the Host every request names; host-confusion runs when the policy's login rules are limited to it (hosts)")
	names := make([]string, 0, len(attackClasses()))
	for _, c := range attackClasses() {
		names = append(names, c.name)
	}
	fs.StringVar(&p.classes, "classes", p.classes, "attacks: comma-separated attack classes to run, default all: "+strings.Join(names, ", "))
	fs.DurationVar(&p.leaseWait, "lease-wait", p.leaseWait, "attacks: the longest in-flight waits for the leases of logins that timed out at the edge to end, to check their slots come back (longer: that check is skipped)")
	fs.IntVar(&p.flood, "flood", p.flood, fmt.Sprintf("attacks: key-flood requests, each from a new /64 (default: the policy's memory max_keys × 1.1; at most %d)", maxRequests))
	fs.IntVar(&p.slowloris, "slowloris", p.slowloris, fmt.Sprintf("attacks: slowloris's half-sent connections from one address (default: the edge's listener cap, %d, and %d more; at most %d)", slowlorisListener, slowlorisOver, slowlorisMax))
}

// check reports a flag out of range.
func (p *attackParams) check() error {
	if p.flood < 0 || p.flood > maxRequests {
		return fmt.Errorf("-flood must be in [0, %d], got %d", maxRequests, p.flood)
	}
	if p.slowloris < 0 || p.slowloris > slowlorisMax {
		return fmt.Errorf("-slowloris must be in [0, %d], got %d", slowlorisMax, p.slowloris)
	}
	if p.leaseWait < 0 || p.leaseWait > 10*time.Minute {
		return fmt.Errorf("-lease-wait must be in [0, 10m], got %v", p.leaseWait)
	}
	if p.host == "" || strings.ContainsAny(p.host, " \t\r\n/@") {
		return fmt.Errorf("-host %q: want a host name such as %s", p.host, attackHost)
	}
	if _, err := p.selected(); err != nil {
		return err
	}
	return nil
}

// selected returns the classes -classes names, in run order.
func (p *attackParams) selected() ([]attackClass, error) {
	all := attackClasses()
	if p.classes == "" {
		return all, nil
	}
	want := make(map[string]bool)
	for _, n := range strings.Split(p.classes, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.ContainsFunc(all, func(c attackClass) bool { return c.name == n }) {
			names := make([]string, len(all))
			for i, c := range all {
				names[i] = c.name
			}
			return nil, fmt.Errorf("-classes: unknown attack class %q (have %s)", n, strings.Join(names, ", "))
		}
		want[n] = true
	}
	var out []attackClass
	for _, c := range all {
		if want[c.name] {
			out = append(out, c)
		}
	}
	return out, nil
}

// attackClass is one class of attack.
type attackClass struct {
	name string
	// requests is the most requests the class sends to the edge.
	requests func(a *attackRun) int64
	run      func(a *attackRun) error
}

// attackClasses returns the classes in run order; the key floods are
// last, since they may evict every counter the others left, or fill a
// rule's key budget.
func attackClasses() []attackClass {
	return []attackClass{
		{"ipv6-rotation", ipv6RotationRequests, runIPv6Rotation},
		{"spoofing", spoofingRequests, runSpoofing},
		{"path-spelling", pathSpellingRequests, runPathSpelling},
		{"method-override", methodOverrideRequests, runMethodOverride},
		{"host-confusion", hostConfusionRequests, runHostConfusion},
		{"account-spelling", accountSpellingRequests, runAccountSpelling},
		{"identity-conflict", identityConflictRequests, runIdentityConflict},
		{"accent-folding", accentFoldingRequests, runAccentFolding},
		{"collation-folding", collationFoldingRequests, runCollationFolding},
		{"phone-format", phoneFormatRequests, runPhoneFormat},
		{"content-type", contentTypeRequests, runContentType},
		{"cookie-cycling", cookieCyclingRequests, runCookieCycling},
		{"minting", mintingRequests, runMinting},
		{"ban", banRequests, runBan},
		{"network-lockout", networkLockoutRequests, runNetworkLockout},
		{"otp-guessing", otpGuessingAttackRequests, runOTPGuessingAttack},
		{"otp-challenge", otpChallengeRequests, runOTPChallenge},
		{"refused-attempts-fill", refusedAttemptsFillRequests, runRefusedAttemptsFill},
		{"network-full-ban", networkFullBanRequests, runNetworkFullBan},
		{"sms-pumping", smsPumpingRequests, runSMSPumping},
		{"range-lockout", rangeLockoutRequests, runRangeLockout},
		{"embedded-ipv4", embeddedIPv4Requests, runEmbeddedIPv4},
		{"in-flight", inflightRequests, runInFlight},
		{"slowloris", slowlorisRequests, runSlowloris},
		{"ban-eviction", banEvictionRequests, runBanEviction},
		{"key-flood", keyFloodRequests, runKeyFlood},
		// Last: on a store without fair key budgets it leaves a sensitive
		// rule's budget full of live state for the rule's period.
		{"key-budget-fill", keyBudgetFillRequests, runKeyBudgetFill},
	}
}

// caseResult is one case's outcome.
type caseResult struct {
	name     string // "path-spelling/%6Cogin"
	skipped  string // why the case did not run; "" when it ran
	sent     int64
	statuses map[int]int64
	gain     int64
	bound    caseBoundResult
	note     string // what gain counts, when it is not every forwarded request
	coll     collateralResult
}

func (r *caseResult) breach() bool {
	return r.skipped == "" && (r.gain > r.bound.bound || r.coll.breach)
}

func (r *caseResult) verdict() string {
	if r.breach() {
		return "BREACH"
	}
	return "ok"
}

// attackRun is one run of the scenario: the node, the policy model and
// what the run has found so far.
type attackRun struct {
	ctx    context.Context
	cfg    config
	p      attackParams
	m      *policyModel
	origin *originView
	cookie string // the visitor cookie's name, "" without a visitor block

	rng      *rand.Rand
	sites    map[uint16]bool // /48s of 2001:db8::/32 already used
	nets     map[uint16]bool // /24s of 198.18.0.0/15 already used
	npas     map[int]bool    // area codes already used
	phones   map[string]bool // numbers outside the blocks already used (ownPhone)
	ranges   map[string]bool // their ranges
	locals   map[netip.Addr]bool
	seq      int64 // request tags
	sent     int64 // requests sent to the edge
	results  []caseResult
	out      io.Writer
	warnings []string
}

// runAttacks runs the attacks scenario.
func runAttacks(ctx context.Context, cfg config) error {
	ap := cfg.attacks
	classes, err := ap.selected()
	if err != nil {
		return err
	}
	src, err := os.ReadFile(ap.policy)
	if err != nil {
		return fmt.Errorf("reading the policy: %w", err)
	}
	m, err := loadPolicyModel(ap.policy, src)
	if err != nil {
		return err
	}
	origin := cfg.otp.origin
	if !ap.originSet {
		if origin, err = parseFlagTarget("the policy's upstream", node.Of(m.p).Upstream); err != nil {
			return fmt.Errorf("%w (give -origin)", err)
		}
	}
	a := &attackRun{
		ctx: ctx, cfg: cfg, p: ap, m: m,
		origin: newOriginView(origin, cfg.timeout),
		rng:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		sites:  make(map[uint16]bool), nets: make(map[uint16]bool), npas: make(map[int]bool),
		phones: make(map[string]bool), ranges: make(map[string]bool),
		locals: make(map[netip.Addr]bool),
		out:    cfg.stdout,
	}
	defer a.origin.close()
	if v := nat.ConfigOf(m.p); v != nil {
		a.cookie = v.Cookie
	}
	if !m.p.Client.Trusted(netip.MustParseAddr("127.0.0.1")) || !m.p.Client.Trusted(netip.IPv6Loopback()) {
		return fmt.Errorf("the policy %s does not trust loopback (trusted_proxies): the attacks play many clients by naming them in %s from this machine, as the other scenarios do",
			ap.policy, m.p.ForwardedHeader)
	}
	var need int64
	for _, c := range classes {
		need += c.requests(a)
	}
	if need > int64(cfg.requests) {
		return fmt.Errorf("the classes need up to %d requests, over -requests %d", need, cfg.requests)
	}
	if err := probe(ctx, cfg.target, cfg.timeout); err != nil {
		return err
	}
	if err := a.checkUpstream(); err != nil {
		return err
	}

	fmt.Fprintf(a.out, "attacks against %s, origin %s, policy %s, host %s\n", cfg.target.base, origin.base, ap.policy, ap.host)
	if m.p.DryRun {
		a.warn("the policy is in dry_run: it bounds nothing, and no request can breach it")
	}
	start := time.Now()
	for _, c := range classes {
		fmt.Fprintf(a.out, "\n%s\n", c.name)
		if err := c.run(a); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}

	var breaches, skipped []string
	ran := 0
	for _, r := range a.results {
		switch {
		case r.skipped != "":
			skipped = append(skipped, r.name)
		case r.breach():
			breaches = append(breaches, r.name)
			ran++
		default:
			ran++
		}
	}
	for _, w := range a.warnings {
		fmt.Fprintf(cfg.stderr, "loadtest: warning: %s\n", w)
	}
	fmt.Fprintf(a.out, "\nattacks: %d cases run, %d skipped, %d requests to the edge, %s\n", ran, len(skipped), a.sent, time.Since(start).Round(time.Millisecond))
	if len(breaches) > 0 {
		fmt.Fprintf(a.out, "attacks: BREACH in %d: %s\n", len(breaches), strings.Join(breaches, ", "))
		return fmt.Errorf("%w: %d attack cases breached the policy's bounds: %s", errMismatch, len(breaches), strings.Join(breaches, ", "))
	}
	fmt.Fprintf(a.out, "attacks: ok: every gain and every collateral within its bound\n")
	return nil
}

// warn records a warning, printed on stderr at the end.
func (a *attackRun) warn(format string, args ...any) {
	a.warnings = append(a.warnings, fmt.Sprintf(format, args...))
}

// checkUpstream sends one tagged request through the edge to a path no
// shipped rule limits and looks for it at the origin: the origin must be
// the edge's upstream, or what reaches it says nothing.
func (a *attackRun) checkUpstream() error {
	c := a.conn(netip.Addr{})
	defer c.close()
	r := a.request(fasthttp.MethodGet, "/trace/attacks-probe")
	a.clientHeader(r, a.v6Client())
	r.tag = a.tag()
	if _, err := c.do(a.ctx, r); err != nil {
		return err
	}
	a.sent++
	_, ok, err := a.origin.reached(a.ctx, r.tag)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("a request sent through %s did not reach %s: is it the edge's upstream (-origin)?", a.cfg.target.base, a.origin.c.addr)
	}
	return nil
}

// conn opens a connection to the edge, from local when it is valid.
func (a *attackRun) conn(local netip.Addr) *rawConn {
	return newRawConn(a.cfg.target.addr, local, a.cfg.timeout, a.cookie)
}

// tag returns a new request tag.
func (a *attackRun) tag() string {
	a.seq++
	return fmt.Sprintf("attack-%d-%d", os.Getpid(), a.seq)
}

// request returns a request for target with Host: -host.
func (a *attackRun) request(method, target string) *rawRequest {
	r := &rawRequest{method: method, target: target}
	r.add("Host", a.p.host)
	return r
}

// clientHeader adds the forwarding header the policy reads, naming
// client, as the trusted proxy this tool plays.
func (a *attackRun) clientHeader(r *rawRequest, client netip.Addr) {
	name, value := forwardingHeader(a.m.p.ForwardedHeader, client)
	r.add(name, value)
}

// forwardingHeader returns the header a trusted proxy adds for client:
// X-Forwarded-For: ADDR, or Forwarded: for=ADDR (RFC 7239 §4, an IPv6
// address bracketed and quoted).
func forwardingHeader(kind string, client netip.Addr) (name, value string) {
	if strings.EqualFold(kind, "Forwarded") {
		if client.Is6() && !client.Is4In6() {
			return "Forwarded", `for="[` + client.String() + `]"`
		}
		return "Forwarded", "for=" + client.Unmap().String()
	}
	return "X-Forwarded-For", client.String()
}

// tcase is one case being run.
type tcase struct {
	a           *attackRun
	res         caseResult
	verdicts    []canonVerdict
	first, last time.Time
	before      otpHits
	// cast is the case's bystanders, once they played (tcase.play).
	cast *cast
	// expect503 marks a case whose attack is answered 503 by design (a key
	// budget full of live state): its 503s are what it measures, not a
	// store that could not decide.
	expect503 bool
	// bound, when set, is the case's bound, which the policy's model
	// cannot compute (a ban's duration): finish uses it as it is.
	bound *caseBoundResult
}

// begin starts a case: the origin's counts before it.
func (a *attackRun) begin(class, name string) (*tcase, error) {
	before, err := a.origin.hits(a.ctx)
	if err != nil {
		return nil, err
	}
	full := caseName(class, name)
	return &tcase{a: a, res: caseResult{name: full, statuses: make(map[int]int64)}, before: before}, nil
}

// caseName is a case's full name: "class/name", or "class:/path" for a
// case named by a path, or the class alone.
func caseName(class, name string) string {
	switch {
	case name == "":
		return class
	case strings.HasPrefix(name, "/"):
		return class + ":" + name
	}
	return class + "/" + name
}

// skip records a case that cannot run, and why.
func (a *attackRun) skip(class, name, why string) {
	full := caseName(class, name)
	r := caseResult{name: full, skipped: why}
	a.results = append(a.results, r)
	fmt.Fprintf(a.out, "attack: %s skipped: %s\n", full, why)
}

// send sends r on c as one of the case's counted requests, canon being
// what it means.
func (tc *tcase) send(c *rawConn, r *rawRequest, canon canonReq) (rawAnswer, error) {
	v, err := tc.a.m.decide(canon)
	if err != nil {
		return rawAnswer{}, err
	}
	tc.verdicts = append(tc.verdicts, v)
	return tc.sendUncounted(c, r)
}

// sendUncounted sends r on c: a request of the case that is not part of
// its gain (a visitor-ID fetch).
func (tc *tcase) sendUncounted(c *rawConn, r *rawRequest) (rawAnswer, error) {
	if tc.first.IsZero() {
		tc.first = time.Now()
	}
	ans, err := c.do(tc.a.ctx, r)
	tc.last = time.Now()
	if err != nil {
		return rawAnswer{}, err
	}
	tc.a.sent++
	tc.res.sent++
	tc.res.statuses[ans.status]++
	return ans, nil
}

// sendTagged is send with a tag, returning also what the origin received
// when the request reached it.
func (tc *tcase) sendTagged(c *rawConn, r *rawRequest, canon canonReq) (rawAnswer, originRequest, bool, error) {
	r.tag = tc.a.tag()
	ans, err := tc.send(c, r, canon)
	if err != nil {
		return rawAnswer{}, originRequest{}, false, err
	}
	got, ok, err := tc.a.origin.reached(tc.a.ctx, r.tag)
	return ans, got, ok, err
}

// reachedAll returns how many requests reached the origin since the case
// began, over paths keep accepts (all when nil), checked against what the
// case sent.
func (tc *tcase) reachedAll(keep func(string) bool) (int64, error) {
	after, err := tc.a.origin.hits(tc.a.ctx)
	if err != nil {
		return 0, err
	}
	n, err := hitsDelta(tc.before, after, keep)
	if err != nil {
		return 0, err
	}
	if n > tc.res.sent {
		return 0, fmt.Errorf("%s: the origin counted %d requests, more than the %d the case sent: other traffic reached it; run again on a quiet node",
			tc.res.name, n, tc.res.sent)
	}
	return n, nil
}

// end reads the case's gain (its requests that reached the origin, over
// the paths keep accepts: reachedAll), plays its cast, and finishes it.
func (tc *tcase) end(cs *cast, keep func(string) bool, note string) error {
	gain, err := tc.reachedAll(keep)
	if err != nil {
		return err
	}
	if err := tc.play(cs); err != nil {
		return err
	}
	tc.finish(gain, note)
	return nil
}

// finish records the case with its gain, computes its bound and prints
// its line.
func (tc *tcase) finish(gain int64, note string) {
	tc.res.gain, tc.res.note = gain, note
	var prior map[consKey]priorUse
	if tc.cast != nil {
		prior = tc.cast.prior
	}
	tc.res.bound = caseBoundPrior(tc.verdicts, tc.first, tc.last, prior)
	if tc.bound != nil {
		tc.res.bound = *tc.bound
	}
	tc.res.coll = tc.cast.collateral()
	tc.a.results = append(tc.a.results, tc.res)
	writeAttackResult(tc.a.out, &tc.res)
	r := &tc.res
	if n := r.statuses[fasthttp.StatusServiceUnavailable]; n > 0 && !tc.expect503 {
		tc.a.warn("%s: %d of %d answers were 503: the edge could not decide them (its store failed or a sensitive rule's key budget was full), so the case's gain says nothing of its bound",
			r.name, n, r.sent)
	}
	if baselineCases[r.name] && r.gain < r.bound.bound {
		tc.a.warn("%s, the canonical request of its class, had %d through, under its bound %d: counters an earlier run left, or a node stricter than %s; the class's gains may understate",
			r.name, r.gain, r.bound.bound, tc.a.p.policy)
	}
}

// baselineCases send each class's canonical request: on a fresh node and
// the policy -policy names, each gains exactly its bound. One that gains
// less says the node is not in the state the bounds assume.
var baselineCases = map[string]bool{
	"ipv6-rotation/within-a-64":              true,
	"spoofing/chain-left":                    true,
	"path-spelling:/login":                   true,
	"method-override/X-HTTP-Method-Override": true,
	"host-confusion/plain":                   true,
	"account-spelling/login":                 true,
	"account-spelling/signup":                true,
	"embedded-ipv4/native":                   true,
}

// writeAttackResult prints a case's line and its details.
func writeAttackResult(w io.Writer, r *caseResult) {
	writeAttackLine(w, r)
	fmt.Fprintf(w, "    sent %d (%s)", r.sent, otpStatuses(r.statuses))
	if r.note != "" {
		fmt.Fprintf(w, "; gain: %s", r.note)
	}
	fmt.Fprintf(w, "\n    bound: %s\n", r.bound.why)
	writeCollateral(w, r)
}

// writeAttackLine prints a case's verdict line.
func writeAttackLine(w io.Writer, r *caseResult) {
	fmt.Fprintf(w, "attack: %s gain=%d bound=%d collateral=%d bound=%d %s\n", r.name, r.gain, r.bound.bound, r.coll.refused, r.coll.bound, r.verdict())
}

// writeCollateral prints what each bystander of a case was refused.
func writeCollateral(w io.Writer, r *caseResult) {
	for _, l := range r.coll.lines {
		fmt.Fprintf(w, "    collateral: %s\n", l)
	}
}

// A run's fresh addresses. Counters persist in a node between runs, so
// every case takes addresses no earlier case of the run took, at random,
// so that an earlier run's are most likely not taken either (and when they
// are, the leftover counters can only lower a gain, never raise it).

// v6Site returns a /48 of 2001:db8::/32 (RFC 3849) not yet used in the run.
func (a *attackRun) v6Site() netip.Prefix {
	for {
		s := uint16(a.rng.Uint32())
		if !a.sites[s] {
			a.sites[s] = true
			b := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(s >> 8), byte(s)}
			return netip.PrefixFrom(netip.AddrFrom16(b), 48)
		}
	}
}

// v6Client returns an address in a new /48.
func (a *attackRun) v6Client() netip.Addr { return v6In(a.v6Site(), 0, 0, a.rng.Uint64()|1) }

// v6In returns the address of site (a /48) with subnet byte s56 (bits
// 48-55), subnet byte s64 (bits 56-63) and interface ID iid.
func v6In(site netip.Prefix, s56, s64 byte, iid uint64) netip.Addr {
	b := site.Addr().As16()
	b[6], b[7] = s56, s64
	for i := range 8 {
		b[15-i] = byte(iid >> (8 * i))
	}
	return netip.AddrFrom16(b)
}

// v4Net returns a /24 of 198.18.0.0/15 (RFC 2544) not yet used in the run.
func (a *attackRun) v4Net() netip.Prefix {
	for {
		n := uint16(a.rng.Uint32N(512))
		if !a.nets[n] {
			a.nets[n] = true
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18 + byte(n>>8), byte(n), 0}), 24)
		}
	}
}

// v4In returns host h of the /24 n.
func v4In(n netip.Prefix, h byte) netip.Addr {
	b := n.Addr().As4()
	b[3] = h
	return netip.AddrFrom4(b)
}

// untrustedPeer returns a loopback address the policy does not trust,
// new in the run, to connect from: its forwarding headers must be
// ignored. ok is false when there is none to use: the target is not an
// IPv4 loopback address (only 127.0.0.0/8 has more than one), or the
// policy trusts all of 127.0.0.0/8.
func (a *attackRun) untrustedPeer() (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(a.cfg.target.addr)
	if err != nil || !ap.Addr().Unmap().Is4() {
		return netip.Addr{}, false
	}
	for range 1000 {
		x := a.rng.Uint32N(1 << 24)
		p := netip.AddrFrom4([4]byte{127, byte(x >> 16), byte(x >> 8), byte(x)})
		if a.locals[p] || a.m.p.Client.Trusted(p) || x == 0 || x == 1<<24-1 {
			continue
		}
		a.locals[p] = true
		return p, true
	}
	return netip.Addr{}, false
}

// block returns a numbering block in an area code not yet used in the
// run (see pickOTPBlock).
func (a *attackRun) block() (otpBlock, error) {
	for range 100 {
		b, err := pickOTPBlock(a.rng.IntN)
		if err != nil {
			return otpBlock{}, err
		}
		n, err := strconv.Atoi(b.phones[0][2:5]) // +1NPA…
		if err != nil {
			return otpBlock{}, err
		}
		if !a.npas[n] {
			a.npas[n] = true
			return b, nil
		}
	}
	return otpBlock{}, errors.New("found no unused area code")
}

// account returns a login identifier no other request of the run named,
// at random, as the run's addresses are (counters an earlier run left on
// an account are most likely not met): "attacks-PREFIX-XXXXXXXX".
func (a *attackRun) account(prefix string) string {
	a.seq++
	return fmt.Sprintf("attacks-%s-%08x%x", prefix, a.rng.Uint32(), a.seq)
}

// email returns an address at example.com (RFC 2606) no other request of
// the run named: a signup's new inbox.
func (a *attackRun) email() string { return a.account("signup") + "@example.com" }

// loginFields is a login attempt's JSON body, as a real client sends it:
// the account and a wrong password (the demo origin answers 401, a
// failure to the count = "failures" rules).
func loginFields(account string, i int) map[string]string {
	return map[string]string{"username": account, "password": fmt.Sprintf("wrong-%d", i)}
}

// loginCanon is POST /login at -host from client.
func (a *attackRun) loginCanon(client netip.Addr, fields map[string]string) canonReq {
	return canonReq{method: fasthttp.MethodPost, path: "/login", host: a.p.host, client: a.m.counted(client), fields: fields}
}

// loginRequest is a login attempt at target on account with a JSON body,
// and its fields.
func (a *attackRun) loginRequest(method, target, account string, i int) (*rawRequest, map[string]string) {
	fields := loginFields(account, i)
	r := a.request(method, target)
	r.add("Content-Type", "application/json")
	r.body = jsonBody(fields)
	return r, fields
}
