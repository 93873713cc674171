package policytest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// epoch is the simulated instant every test starts at, 2026-01-01T00:00:00Z.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// peerPort is the port of every request's socket peer.
const peerPort = 40000

// keySecret keys the test edge's counter hashes: tests are deterministic,
// and nothing they count is anyone's identity.
var keySecret = []byte("policytest: counter keys of edge test runs")

// visitorSecret signs visitor cookies when the policy's secret_env is
// unset (nat.MinSecretLen bytes or more).
const visitorSecret = "policytest-visitor-secret-for-edge-test-runs"

// Run runs tests against p, one at a time, each from empty counters at the
// simulated instant 2026-01-01T00:00:00Z, and writes one line per test to
// out ("PASS name", or "FAIL FILE:LINE: name: request 2 (repeat 3 of 5): got
// deny by "x", want allow", FILE:LINE the failing request block's, as the
// file was named to Parse; a test stops at its first failure), then a summary
// line. failed is the number of tests that failed; err is a problem running
// them at all (the simulated origin could not listen, the visitor secrets
// in the environment are invalid), after which no result is complete.
//
// A request without a visitor is sent without a visitor cookie (the edge's
// Set-Cookie on a previous answer is not kept), so each is a new visitor.
func Run(ctx context.Context, p *rules.Policy, tests []Test, out io.Writer) (failed int, err error) {
	fs, err := run(ctx, p, tests, out, runOptions{})
	return len(fs), err
}

// RunFailures is Run returning the failed tests, in the order run, for a
// caller that reports them its own way (a reload's diagnostics).
func RunFailures(ctx context.Context, p *rules.Policy, tests []Test, out io.Writer) ([]Failure, error) {
	return run(ctx, p, tests, out, runOptions{})
}

// Failure is a test that failed, at its first failing request.
type Failure struct {
	Test *Test
	// At is the failing request block's header, `request`, in the file
	// named to Parse.
	At hcl.Range
	// Msg says which send of the request failed and how: "request 2
	// (repeat 3 of 5): got deny by "x", want allow".
	Msg string
}

// String is the failure as Run's FAIL line has it, without "FAIL ":
// "FILE:LINE: NAME: MSG", the position first for editors and CI.
func (f Failure) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", f.At.Filename, f.At.Start.Line, f.Test.Name, f.Msg)
}

// runOptions are the seams the package's own tests use.
type runOptions struct {
	// newStore replaces the memory store each test starts with.
	newStore func(p *rules.Policy) (rules.Store, error)
	// origin sees every request the simulated origin receives.
	origin func(ctx *fasthttp.RequestCtx)
}

// simClock is the simulated clock: the handler reads it on the goroutine
// that runs the tests, and no background loop holds it (the memory store
// runs without its sweeper), so it needs no lock.
type simClock struct{ now time.Time }

func (c *simClock) Now() time.Time { return c.now }

func run(ctx context.Context, p *rules.Policy, tests []Test, out io.Writer, opts runOptions) (failed []Failure, err error) {
	var signer *nat.Signer
	if v := nat.ConfigOf(p); v != nil {
		if os.Getenv(v.SecretEnv) == "" {
			// The edge reads its visitor secrets from the environment
			// (nat.Extension's signer); the test run signs with the same.
			if err := os.Setenv(v.SecretEnv, visitorSecret); err != nil {
				return nil, fmt.Errorf("setting $%s: %w", v.SecretEnv, err)
			}
			defer os.Unsetenv(v.SecretEnv)
		}
		secrets, err := nat.ParseSecrets(os.Getenv(v.SecretEnv))
		if err != nil {
			return nil, fmt.Errorf("visitor secrets in $%s: %w", v.SecretEnv, err)
		}
		if signer, err = nat.NewSigner(nat.Options{Secrets: secrets, MaxAge: v.MaxAge, Cookie: v.Cookie, Insecure: !v.Secure}); err != nil {
			return nil, fmt.Errorf("creating visitor signer: %w", err)
		}
	}

	o, err := startOrigin(opts.origin)
	if err != nil {
		return nil, err
	}
	defer o.close()

	for i := range tests {
		if err := ctx.Err(); err != nil {
			return failed, err
		}
		at, msg, err := runTest(ctx, p, &tests[i], o, signer, opts)
		if err != nil {
			return failed, fmt.Errorf("running test %q: %w", tests[i].Name, err)
		}
		if msg != "" {
			f := Failure{Test: &tests[i], At: at, Msg: msg}
			failed = append(failed, f)
			fmt.Fprintf(out, "FAIL %s\n", f)
		} else {
			fmt.Fprintf(out, "PASS %s\n", tests[i].Name)
		}
	}
	fmt.Fprintf(out, "%d tests: %d passed, %d failed\n", len(tests), len(tests)-len(failed), len(failed))
	return failed, nil
}

// origin is the simulated origin: a loopback server answering every
// request with status.
type origin struct {
	srv    *fasthttp.Server
	ln     net.Listener
	status atomic.Int64
	// headers are the current request's origin_headers.
	headers atomic.Pointer[[]Header]
	done    chan error
}

func startOrigin(see func(*fasthttp.RequestCtx)) (*origin, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the simulated origin: %w", err)
	}
	o := &origin{ln: ln, done: make(chan error, 1)}
	o.srv = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if see != nil {
				see(ctx)
			}
			ctx.SetStatusCode(int(o.status.Load()))
			if hs := o.headers.Load(); hs != nil {
				for _, h := range *hs {
					ctx.Response.Header.Add(h.Name, h.Value)
				}
			}
		},
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		NoDefaultDate:         true,
	}
	go func() { o.done <- o.srv.Serve(ln) }()
	return o, nil
}

func (o *origin) close() {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = o.srv.ShutdownWithContext(sctx)
	_ = o.ln.Close()
	<-o.done
}

// observed is what the edge did with one request.
type observed struct {
	decided bool // the Engine decided (false: a request the edge could not read)
	verdict rules.Verdict
	// refusing are the rules that refused (deny), found the identity
	// missing or invalid (reject) or failed closed (error_deny); dryRun the
	// rules that would have refused.
	refusing, dryRun []string
	status           int
}

// runTest runs one test on a fresh edge and returns "" when it passes, or
// what failed and where: the failing request block's header.
func runTest(ctx context.Context, p *rules.Policy, t *Test, o *origin, signer *nat.Signer, opts runOptions) (hcl.Range, string, error) {
	var st rules.Store
	var err error
	if opts.newStore != nil {
		st, err = opts.newStore(p)
	} else {
		// As cmd/edge builds it, without the sweeper: it would read the
		// wall clock, not the simulated one.
		st, err = memstore.New(memstore.Options{MaxKeys: node.Of(p).Store.MaxKeys, SweepInterval: -1})
	}
	if err != nil {
		return hcl.Range{}, "", fmt.Errorf("creating store: %w", err)
	}
	defer st.Close()

	clock := &simClock{now: epoch}
	var cur observed
	srv, err := gateway.New(gateway.Options{
		Policy: p, Store: st, KeySecret: keySecret, Clock: clock, Extensions: builtin.Extensions(),
		Upstream: "http://" + o.ln.Addr().String(),
		// A queue = true rule's hold ends at once: the simulated clock
		// moves only between requests, so a test block sees the
		// decisions, never waits out the delay (docs/policy.md, "Queue").
		QueueAfter: func(time.Duration) <-chan time.Time { return released },
		Observe: func(d *rules.Decision, ms []rules.Match) {
			cur.decided, cur.verdict = true, d.Verdict
			for i := range ms {
				switch ms[i].Outcome {
				case rules.OutcomeDeny, rules.OutcomeMissing, rules.OutcomeInvalid, rules.OutcomeStoreErrorDeny:
					cur.refusing = append(cur.refusing, ms[i].Rule.Name)
				case rules.OutcomeDryRunDeny:
					cur.dryRun = append(cur.dryRun, ms[i].Rule.Name)
				}
			}
		},
	})
	if err != nil {
		return hcl.Range{}, "", fmt.Errorf("creating the edge: %w", err)
	}

	host := node.Of(p).Listen
	visitors := map[string][]byte{} // visitor name → its cookie value
	var raw []byte
	var req fasthttp.Request
	peer := &net.TCPAddr{Port: peerPort}
	for i := range t.Requests {
		r := &t.Requests[i]
		clock.now = clock.now.Add(r.After)
		o.status.Store(int64(r.OriginStatus))
		o.headers.Store(&r.OriginHeaders)
		var cookie []byte
		if r.Visitor != "" {
			if cookie = visitors[r.Visitor]; cookie == nil {
				cookie, _ = signer.Mint(nil, clock.now)
				visitors[r.Visitor] = cookie
			}
		}
		raw = appendRequest(raw[:0], r, host, signer, cookie)
		peer.IP = r.From.AsSlice()
		for k := 1; k <= r.Repeat; k++ {
			if err := ctx.Err(); err != nil {
				return hcl.Range{}, "", err
			}
			cur = observed{}
			req.Reset()
			if err := req.ReadLimitBody(bufio.NewReader(bytes.NewReader(raw)), node.Of(p).MaxBodyBytes); err != nil {
				// The edge's server answers what it cannot read before the
				// handler (gateway's errorHandler).
				cur.status = fasthttp.StatusBadRequest
				if errors.Is(err, fasthttp.ErrBodyTooLarge) {
					cur.status = fasthttp.StatusRequestEntityTooLarge
				}
			} else {
				var rctx fasthttp.RequestCtx
				rctx.Init(&req, peer, nil)
				srv.Handler(&rctx)
				cur.status = rctx.Response.StatusCode()
			}
			if msg := compare(r, &cur); msg != "" {
				where := fmt.Sprintf("request %d", i+1)
				if r.Repeat > 1 {
					where += fmt.Sprintf(" (repeat %d of %d)", k, r.Repeat)
				}
				return r.Range, where + ": " + msg, nil
			}
		}
	}
	return hcl.Range{}, "", nil
}

// appendRequest appends the HTTP/1.1 request r as a client sends it: the
// request line as written, Host (unless r's headers name one), r's headers
// in order, one Cookie header (r's cookies, then the visitor's), the
// body's Content-Type (unless r's headers name one) and Content-Length.
func appendRequest(b []byte, r *Request, host string, signer *nat.Signer, visitor []byte) []byte {
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, r.Path...)
	b = append(b, " HTTP/1.1\r\n"...)
	named := func(name string) bool {
		return slices.ContainsFunc(r.Headers, func(h Header) bool { return strings.EqualFold(h.Name, name) })
	}
	if !named("Host") {
		b = append(b, "Host: "...)
		b = append(b, host...)
		b = append(b, "\r\n"...)
	}
	for _, h := range r.Headers {
		b = append(b, h.Name...)
		b = append(b, ": "...)
		b = append(b, h.Value...)
		b = append(b, "\r\n"...)
	}
	if len(r.Cookies) > 0 || visitor != nil {
		b = append(b, "Cookie: "...)
		for i, c := range r.Cookies {
			if i > 0 {
				b = append(b, "; "...)
			}
			b = append(b, c.Name...)
			b = append(b, '=')
			b = append(b, c.Value...)
		}
		if visitor != nil {
			if len(r.Cookies) > 0 {
				b = append(b, "; "...)
			}
			b = append(b, signer.CookieName()...)
			b = append(b, '=')
			b = append(b, visitor...)
		}
		b = append(b, "\r\n"...)
	}
	if r.ContentType != "" && !named("Content-Type") {
		b = append(b, "Content-Type: "...)
		b = append(b, r.ContentType...)
		b = append(b, "\r\n"...)
	}
	if !named("Content-Length") && !named("Transfer-Encoding") {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(r.Body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, r.Body...)
}

// compare returns "" when what the edge did matches r's expectation, or
// what it did instead ("got deny by "x", want allow").
func compare(r *Request, o *observed) string {
	got, by, ok := o.expect()
	if !ok {
		return fmt.Sprintf("got status %d from the edge, want %s", o.status, want(r))
	}
	if got == ExpectAllow && o.status != r.OriginStatus {
		return fmt.Sprintf("forwarded, but the edge answered %d where the origin answers %d", o.status, r.OriginStatus)
	}
	if got == r.Expect && (r.Rule == "" || slices.Contains(by, r.Rule)) {
		return ""
	}
	return "got " + describe(got, by) + ", want " + want(r)
}

// expect classifies what the edge did as an expectation, with the rules
// behind it; ok is false for an answer no expectation names (413).
func (o *observed) expect() (e Expect, by []string, ok bool) {
	if !o.decided {
		return ExpectReject, nil, o.status == fasthttp.StatusBadRequest
	}
	switch o.verdict {
	case rules.Forward:
		if len(o.dryRun) > 0 {
			return ExpectDryRunDeny, o.dryRun, true
		}
		return ExpectAllow, nil, true
	case rules.RefuseLimit, rules.RefuseForbidden:
		return ExpectDeny, o.refusing, true
	case rules.RejectMissing, rules.RejectInvalid:
		return ExpectReject, o.refusing, true
	case rules.Unavailable:
		return ExpectErrorDeny, o.refusing, true
	}
	return 0, nil, false
}

func want(r *Request) string {
	if r.Rule == "" {
		return r.Expect.String()
	}
	return describe(r.Expect, []string{r.Rule})
}

func describe(e Expect, by []string) string {
	if len(by) == 0 {
		return e.String()
	}
	q := make([]string, len(by))
	for i, n := range by {
		q[i] = strconv.Quote(n)
	}
	list := q[0]
	if n := len(q); n > 1 {
		list = strings.Join(q[:n-1], ", ") + " and " + q[n-1]
	}
	return e.String() + " by " + list
}

// released is a channel that has delivered: the queue holds of a test run.
var released = func() <-chan time.Time {
	ch := make(chan time.Time)
	close(ch)
	return ch
}()
