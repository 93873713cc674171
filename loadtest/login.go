package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
)

// Shared by the login scenarios of issue 11, credential-stuffing
// (login_stuffing.go) and brute-force (login_bruteforce.go). Both send
// POST /login through the edge as many clients (the forwarding header the
// policy reads, from loopback, which the policy must trust, as the other
// scenarios do), count what reached the origin by reading the demo
// origin's /__origin/hits before and after, and take their bounds from the
// policy file the node serves (-policy), compiled by the edge's own
// compiler and shown a canonical login request (attacks_model.go): which
// rules match, with which limits. A legitimate user's login is the demo
// origin's password (-password), which it accepts for any username.

// loginPath is the route the login rules limit and the demo origin serves.
const loginPath = "/login"

// loginDuration is the login scenarios' default -duration.
const loginDuration = 2 * time.Minute

// Bounds on the login flags.
const (
	maxLoginAccounts = 100_000
	maxLoginCrowd    = 10_000
	maxLoginGuessers = 10_000
	maxLoginGuesses  = 1_000
	maxLoginUser     = 1_000
	maxCrowdSpread   = 10 * time.Minute
)

// loginParams are the login scenarios' flags.
type loginParams struct {
	accounts    int           // credential-stuffing: accounts tried, once each
	crowd       int           // credential-stuffing: real users behind one address
	crowdSpread time.Duration // credential-stuffing: the crowd's logins spread over this; 0: what the policy needs
	guessers    int           // brute-force: attacking addresses
	guesses     int           // brute-force: wrong guesses per address
	userLogins  int           // brute-force: the real user's logins during the attack
	password    string        // the password the origin accepts
}

var defaultLoginParams = loginParams{
	accounts:   1000,
	crowd:      50,
	guessers:   200,
	guesses:    10,
	userLogins: 10,
	password:   "letmein-demo", // demo/origin.go
}

// register defines the login flags on fs, writing into p.
func (p *loginParams) register(fs *flag.FlagSet) {
	fs.IntVar(&p.accounts, "accounts", p.accounts, fmt.Sprintf("credential-stuffing: accounts the attacker tries from one address, once each, with a wrong password (at most %d)", maxLoginAccounts))
	fs.IntVar(&p.crowd, "crowd", p.crowd, fmt.Sprintf("credential-stuffing: real users behind one other address (a NAT), each logging in once with the right password (at most %d)", maxLoginCrowd))
	fs.DurationVar(&p.crowdSpread, "crowd-spread", p.crowdSpread, "credential-stuffing: the crowd's logins are spread evenly over this; 0: the least the policy's per-address request limits need to let every one through (at most "+maxCrowdSpread.String()+")")
	fs.IntVar(&p.guessers, "guessers", p.guessers, fmt.Sprintf("brute-force: addresses guessing one account's password (at most %d)", maxLoginGuessers))
	fs.IntVar(&p.guesses, "guesses", p.guesses, fmt.Sprintf("brute-force: wrong guesses per address (at most %d)", maxLoginGuesses))
	fs.IntVar(&p.userLogins, "user-logins", p.userLogins, fmt.Sprintf("brute-force: the real user's logins from its own address, spread through the attack (at most %d)", maxLoginUser))
	fs.StringVar(&p.password, "password", p.password, "credential-stuffing, brute-force: the password the origin accepts (the demo origin's)")
}

// check reports a flag out of range, naming it.
func (p *loginParams) check() error {
	switch {
	case p.accounts < 1 || p.accounts > maxLoginAccounts:
		return fmt.Errorf("-accounts must be in [1, %d], got %d", maxLoginAccounts, p.accounts)
	case p.crowd < 0 || p.crowd > maxLoginCrowd:
		return fmt.Errorf("-crowd must be in [0, %d], got %d", maxLoginCrowd, p.crowd)
	case p.crowdSpread < 0 || p.crowdSpread > maxCrowdSpread:
		return fmt.Errorf("-crowd-spread must be in [0, %v], got %v", maxCrowdSpread, p.crowdSpread)
	case p.guessers < 1 || p.guessers > maxLoginGuessers:
		return fmt.Errorf("-guessers must be in [1, %d], got %d", maxLoginGuessers, p.guessers)
	case p.guesses < 1 || p.guesses > maxLoginGuesses:
		return fmt.Errorf("-guesses must be in [1, %d], got %d", maxLoginGuesses, p.guesses)
	case p.userLogins < 0 || p.userLogins > maxLoginUser:
		return fmt.Errorf("-user-logins must be in [0, %d], got %d", maxLoginUser, p.userLogins)
	case p.password == "":
		return errors.New("-password must not be empty")
	}
	return nil
}

// loginRule is a rule of the policy that holds login requests, and its op
// on a canonical login request.
type loginRule struct {
	rule *rules.Rule
	op   rules.Op
}

// describe renders the rule and its parameters:
// "login-accounts-per-ip: distinct 10 per 1h0m0s".
func (r loginRule) describe() string { return r.rule.Name + ": " + describeOp(r.op) }

// loginRun is what both login scenarios begin with: the policy model,
// clients for the edge and the origin, the origin's counts before the
// run, and a random tag that keeps the run's accounts its own.
type loginRun struct {
	cfg    config
	m      *policyModel
	origin target
	view   *originView
	before otpHits
	start  time.Time
	tag    string
	rng    *rand.Rand
	used   map[int]bool // client addresses taken (clientAddr indexes)
}

// startLoginRun loads -policy, checks the node and the origin, and reads
// the origin's counts.
func startLoginRun(ctx context.Context, cfg config) (*loginRun, error) {
	src, err := os.ReadFile(cfg.attacks.policy)
	if err != nil {
		return nil, fmt.Errorf("reading the policy: %w", err)
	}
	m, err := loadPolicyModel(cfg.attacks.policy, src)
	if err != nil {
		return nil, err
	}
	if !m.p.Client.Trusted(netip.MustParseAddr("127.0.0.1")) || !m.p.Client.Trusted(netip.IPv6Loopback()) {
		return nil, fmt.Errorf("the policy %s does not trust loopback (trusted_proxies): the login scenarios play many clients by naming them in %s from this machine, as the other scenarios do",
			cfg.attacks.policy, m.p.ForwardedHeader)
	}
	origin := cfg.otp.origin
	if !cfg.attacks.originSet {
		if origin, err = parseFlagTarget("the policy's upstream", node.Of(m.p).Upstream); err != nil {
			return nil, fmt.Errorf("%w (give -origin)", err)
		}
	}
	if err := probe(ctx, cfg.target, cfg.timeout); err != nil {
		return nil, err
	}
	r := &loginRun{
		cfg: cfg, m: m, origin: origin, view: newOriginView(origin, cfg.timeout),
		rng:  rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		used: make(map[int]bool),
	}
	r.tag = fmt.Sprintf("%x", r.rng.Uint32())
	if r.before, err = r.view.hits(ctx); err != nil {
		r.close()
		return nil, err
	}
	r.start = time.Now()
	return r, nil
}

func (r *loginRun) close() { r.view.close() }

// client returns a client address of 198.18.0.0/15 not yet taken in the
// run, at random, so counters an earlier run left most likely do not
// count.
func (r *loginRun) client() netip.Addr {
	for {
		i := r.rng.IntN(maxClients)
		if !r.used[i] {
			r.used[i] = true
			return clientAddr(i)
		}
	}
}

// rulesFor returns the enforcing rules that hold POST /login by username
// from client, with their ops.
func (r *loginRun) rulesFor(client netip.Addr, username string) ([]loginRule, error) {
	m := r.m
	body, err := json.Marshal(map[string]string{"username": username, "password": "model"})
	if err != nil {
		return nil, err
	}
	req := rules.Request{
		Method: []byte(fasthttp.MethodPost),
		Host:   []byte(r.cfg.attacks.host),
		Path:   []byte(loginPath),
		Client: m.counted(client),
		Fields: &modelFields{body: body},
	}
	m.s.Begin(m.p)
	d := m.e.Check(context.Background(), time.Now(), m.p, &req, m.s)
	// The model forwards nothing: what the decision took in flight (a
	// concurrency lease, a load-shedding slot) is given back at once.
	_ = m.e.Release(context.Background(), time.Now(), m.s)
	if d.Verdict != rules.Forward {
		return nil, fmt.Errorf("the policy %s refuses every login outright (POST %s at %s): nothing to bound", m.path, loginPath, r.cfg.attacks.host)
	}
	var out []loginRule
	for _, mt := range m.s.Matches {
		if mt.Enforce && mt.Op >= 0 {
			out = append(out, loginRule{rule: mt.Rule, op: m.s.Ops[mt.Op]})
		}
	}
	return out, nil
}

// keyedOn reports whether r's key is exactly the characteristics names,
// in any order.
func keyedOn(r *rules.Rule, names ...string) bool {
	if len(r.KeyNames) != len(names) {
		return false
	}
	for _, n := range names {
		if !slices.Contains(r.KeyNames, n) {
			return false
		}
	}
	return true
}

// finish reads how many logins reached the origin since the run began,
// checked against what the run saw: at least the answers only the origin
// gives (forwarded), at most the requests sent.
func (r *loginRun) finish(ctx context.Context, forwarded, sent int64) (int64, error) {
	// A new connection: the origin may have closed the first one, idle
	// while the crowd was spread out.
	r.view.close()
	r.view = newOriginView(r.origin, r.cfg.timeout)
	after, err := r.view.hits(ctx)
	if err != nil {
		return 0, err
	}
	reached, err := otpReached(r.before, after, loginPath)
	if err != nil {
		return 0, err
	}
	if err := otpCheckOrigin(loginPath, reached, forwarded, sent); err != nil {
		return 0, err
	}
	return reached, nil
}

// loginClient sends logins to the edge on one connection, as the trusted
// proxy this tool plays: the client named in the policy's forwarding
// header, Host: -host, a JSON body, and the visitor cookie once visit got
// one (a browser's), none otherwise.
type loginClient struct {
	hc      *fasthttp.HostClient
	base    string
	host    string
	cookie  []byte // "NAME=VALUE" of the visitor cookie, or nil
	header  string // the policy's forwarded_header
	timeout time.Duration
}

func (r *loginRun) newClient() *loginClient {
	cfg := r.cfg
	return &loginClient{
		hc: &fasthttp.HostClient{
			Addr:                      cfg.target.addr,
			Name:                      "edge-loadtest",
			MaxConns:                  1,
			MaxIdemponentCallAttempts: 1, // a retry would count twice at the edge
			ReadTimeout:               cfg.timeout,
			WriteTimeout:              cfg.timeout,
			DisablePathNormalizing:    true,
		},
		base: cfg.target.base, host: cfg.attacks.host, header: r.m.p.ForwardedHeader, timeout: cfg.timeout,
	}
}

func (c *loginClient) close() { c.hc.CloseIdleConnections() }

// login sends POST /login with username and password from client and
// returns the status.
func (c *loginClient) login(ctx context.Context, client netip.Addr, username, password string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("POST %s: the -duration budget is spent: %w", loginPath, err)
	}
	timeout := c.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	body, err := json.Marshal(map[string]string{"username": username, "password": password})
	if err != nil {
		return 0, err
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + loginPath)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetHost(c.host)
	name, value := forwardingHeader(c.header, client)
	req.Header.Set(name, value)
	req.Header.SetContentType("application/json")
	if c.cookie != nil {
		req.Header.SetBytesV("Cookie", c.cookie)
	}
	req.SetBodyRaw(body)
	if err := c.hc.DoTimeout(req, resp, timeout); err != nil {
		if errors.Is(err, fasthttp.ErrTimeout) && ctx.Err() != nil {
			err = fmt.Errorf("the -duration budget is spent: %w", err)
		}
		return 0, fmt.Errorf("POST %s%s: %w", c.base, loginPath, err)
	}
	return resp.StatusCode(), nil
}

// visit loads the login page from client, as a browser does before it
// logs in, and keeps the visitor cookie named name the edge sets (a
// policy with a visitor block mints one on the first forwarded request).
// It reports whether it got one.
func (c *loginClient) visit(ctx context.Context, client netip.Addr, name string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + loginPath)
	req.Header.SetHost(c.host)
	hn, hv := forwardingHeader(c.header, client)
	req.Header.Set(hn, hv)
	if err := c.hc.DoTimeout(req, resp, c.timeout); err != nil {
		return false, fmt.Errorf("GET %s%s: %w", c.base, loginPath, err)
	}
	v := resp.Header.PeekCookie(name)
	if len(v) == 0 {
		return false, nil
	}
	ck := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(ck)
	if err := ck.ParseBytes(v); err != nil || len(ck.Value()) == 0 {
		return false, nil
	}
	c.cookie = append(append(append(c.cookie[:0], name...), '='), ck.Value()...)
	return true, nil
}

// originAnswer reports whether status is one only the origin gives to a
// login (the demo origin's 200 and 401): the edge refuses with 429, 400 or
// 503, never those.
func originAnswer(status int) bool {
	return status == fasthttp.StatusOK || status == fasthttp.StatusUnauthorized
}

// legitCheck is the legitimate users' outcome: how many logins, how many
// succeeded (200).
type legitCheck struct {
	who       string // "crowd logins"
	attempted int64
	succeeded int64
}

func (l legitCheck) ok() bool { return l.succeeded == l.attempted }

func (l legitCheck) rate() float64 {
	if l.attempted == 0 {
		return 100
	}
	return 100 * float64(l.succeeded) / float64(l.attempted)
}

// line renders "50 of 50 (100.0%): ok".
func (l legitCheck) line() string {
	v := "ok"
	if !l.ok() {
		v = fmt.Sprintf("FAILED, %d refused", l.attempted-l.succeeded)
	}
	return fmt.Sprintf("%d of %d (%.1f%%): %s", l.succeeded, l.attempted, l.rate(), v)
}

// failure describes the users' failure, "" when every login succeeded.
func (l legitCheck) failure() string {
	if l.ok() {
		return ""
	}
	return fmt.Sprintf("%d of %d %s succeeded (%.1f%%), want all", l.succeeded, l.attempted, l.who, l.rate())
}

// loginFailures lists the breaches and the legitimate users' failures.
func loginFailures(bounds []otpBound, legit ...legitCheck) []string {
	out := otpFailures(bounds...)
	for _, l := range legit {
		if f := l.failure(); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// loginResult ends a run: the report, then errMismatch on any failure.
func loginResult(cfg config, name, report string, failures []string) error {
	var b strings.Builder
	b.WriteString(report)
	if len(failures) > 0 {
		fmt.Fprintf(&b, "\n%s: FAIL: %s\n", name, strings.Join(failures, "; "))
	}
	if _, err := fmt.Fprint(cfg.stdout, b.String()); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if len(failures) > 0 {
		return fmt.Errorf("%w: %s", errMismatch, strings.Join(failures, "; "))
	}
	return nil
}
