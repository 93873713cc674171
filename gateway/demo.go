package gateway

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Demo origin limits. The origin is a test and demo fixture, but it listens
// on a socket, so everything it keeps is bounded.
const (
	// demoPassword is the one password /login accepts, whatever the username.
	demoPassword = "letmein-demo"
	// demoChallengeTTL is how long an OTP challenge can be verified.
	demoChallengeTTL = 10 * time.Minute
	// demoMaxChallenges bounds the pending OTP challenges; the oldest is
	// dropped first.
	demoMaxChallenges = 100_000
	// demoMaxHitPaths bounds the distinct paths /__origin/hits reports; a
	// new path beyond it is not recorded (its request is still answered).
	demoMaxHitPaths = 10_000
	// demoMaxBodyBytes caps request bodies read by the demo server.
	demoMaxBodyBytes = 1 << 20
	// demoShutdownTimeout bounds how long ServeDemoOrigin waits for
	// in-flight requests once its context is done.
	demoShutdownTimeout = 5 * time.Second
)

// DemoRequest describes one request as the demo origin received it. It is
// the body of GET /__origin/last.
type DemoRequest struct {
	// Method is the request line's method.
	Method string `json:"method"`
	// Path is the request line's path exactly as sent (no normalisation,
	// no query string).
	Path string `json:"path"`
	// Headers holds every request header under its canonical name; repeated
	// headers are joined with ", ".
	Headers map[string]string `json:"headers"`
}

// DemoOrigin is the built-in demo origin that `edge -demo` and
// `edge demo-origin` serve behind the edge (DESIGN §8). Besides the demo
// endpoints it records, per raw request path, how many requests reached it,
// so tests can check what the edge forwarded.
//
// A DemoOrigin is safe for concurrent use.
type DemoOrigin struct {
	// now is the clock for OTP expiry; tests replace it.
	now func() time.Time
	// maxChallenges and maxHitPaths are the bounds; tests lower them.
	maxChallenges, maxHitPaths int

	mu   sync.Mutex
	hits map[string]int64
	last *DemoRequest

	otpMu      sync.Mutex
	challenges map[string]*list.Element // of *demoChallenge, by ID
	order      list.List                // of *demoChallenge, oldest first
}

// demoChallenge is one pending OTP challenge.
type demoChallenge struct {
	id      string
	phone   string // digits only, see phoneDigits
	code    string
	expires time.Time
}

// NewDemoOrigin returns an empty demo origin.
func NewDemoOrigin() *DemoOrigin {
	return &DemoOrigin{
		now:           time.Now,
		maxChallenges: demoMaxChallenges,
		maxHitPaths:   demoMaxHitPaths,
		hits:          make(map[string]int64),
		challenges:    make(map[string]*list.Element),
	}
}

// Hits returns a copy of the request counts per raw path.
func (d *DemoOrigin) Hits() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int64, len(d.hits))
	for p, n := range d.hits {
		out[p] = n
	}
	return out
}

// Last returns the last counted request, and false when there was none
// since the origin started or was reset.
func (d *DemoOrigin) Last() (DemoRequest, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		return DemoRequest{}, false
	}
	return *d.last, true // Headers is never written after record
}

// Reset forgets the recorded hits and the last request. Pending OTP
// challenges are kept.
func (d *DemoOrigin) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.hits)
	d.last = nil
}

// Handler is the demo origin's fasthttp handler.
//
// Requests are recorded under the raw path as it arrived on the wire, and
// routed the way permissive web frameworks route (Express's defaults, for
// one): on the normalised path, ignoring case and a trailing slash, so
// //login, /%6Cogin, /LOGIN and /login/ all reach the login handler. The
// demo origin also honours X-HTTP-Method-Override, X-HTTP-Method and
// X-Method-Override, as many frameworks do. These are the reasons the edge
// canonicalises paths and matches overridden methods: against this origin,
// a limit that did not would be bypassed.
func (d *DemoOrigin) Handler(ctx *fasthttp.RequestCtx) {
	if p, ok := strings.CutPrefix(string(ctx.Path()), "/__origin/"); ok {
		d.serveControl(ctx, p)
		return
	}
	d.record(ctx)

	path := strings.ToLower(string(ctx.Path()))
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}

	method := effectiveMethod(&ctx.Request.Header)
	switch {
	case path == "/login" && method == fasthttp.MethodPost:
		d.login(ctx)
	case path == "/signup" && method == fasthttp.MethodPost:
		writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
	case path == "/otp/send" && method == fasthttp.MethodPost:
		d.otpSend(ctx)
	case path == "/otp/verify" && method == fasthttp.MethodPost:
		d.otpVerify(ctx)
	case underPrefix(path, "/api"), underPrefix(path, "/trace"):
		writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
	default:
		writeJSON(ctx, fasthttp.StatusNotFound, `{"error":"not found"}`)
	}
}

// underPrefix reports whether path is prefix itself or lies below it.
func underPrefix(path, prefix string) bool {
	rest, ok := strings.CutPrefix(path, prefix)
	return ok && (rest == "" || rest[0] == '/')
}

// effectiveMethod is the request's method, or the method an override header
// names.
func effectiveMethod(h *fasthttp.RequestHeader) string {
	for _, name := range [...]string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"} {
		if v := bytes.TrimSpace(h.Peek(name)); len(v) > 0 {
			return strings.ToUpper(string(v))
		}
	}
	return string(h.Method())
}

// serveControl answers /__origin/<p>, the test hooks. They are not counted.
//
// They answer only requests made to the origin directly: a request that came
// through a proxy (it carries X-Forwarded-For, which the edge always sets)
// gets 404, so nobody can read another client's headers from /last or wipe
// the counts through the edge.
func (d *DemoOrigin) serveControl(ctx *fasthttp.RequestCtx, p string) {
	if len(ctx.Request.Header.Peek(fasthttp.HeaderXForwardedFor)) > 0 {
		writeJSON(ctx, fasthttp.StatusNotFound, `{"error":"not found"}`)
		return
	}
	switch {
	case p == "hits" && ctx.IsGet():
		writeJSONValue(ctx, fasthttp.StatusOK, d.Hits())
	case p == "last" && ctx.IsGet():
		last, ok := d.Last()
		if !ok {
			writeJSON(ctx, fasthttp.StatusNotFound, `{"error":"no request yet"}`)
			return
		}
		writeJSONValue(ctx, fasthttp.StatusOK, last)
	case p == "reset" && ctx.IsPost():
		d.Reset()
		writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
	default:
		writeJSON(ctx, fasthttp.StatusNotFound, `{"error":"not found"}`)
	}
}

// record counts the request under its raw path and keeps it as the last one.
func (d *DemoOrigin) record(ctx *fasthttp.RequestCtx) {
	req := DemoRequest{
		Method:  string(ctx.Method()),
		Path:    rawPath(ctx.Request.Header.RequestURI()),
		Headers: make(map[string]string),
	}
	for k, v := range ctx.Request.Header.All() {
		name := textproto.CanonicalMIMEHeaderKey(string(k))
		if prev, ok := req.Headers[name]; ok {
			req.Headers[name] = prev + ", " + string(v)
		} else {
			req.Headers[name] = string(v)
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.hits[req.Path]; ok || len(d.hits) < d.maxHitPaths {
		d.hits[req.Path]++
	}
	d.last = &req
}

// rawPath returns the path of a request-target exactly as sent: the
// origin-form target up to its query, or the path of an absolute-form
// target. An authority-form or asterisk-form target is returned whole.
func rawPath(uri []byte) string {
	if len(uri) > 0 && uri[0] != '/' {
		if i := bytes.Index(uri, []byte("://")); i > 0 {
			rest := uri[i+3:]
			j := bytes.IndexByte(rest, '/')
			if j < 0 {
				return "/"
			}
			uri = rest[j:]
		}
	}
	if i := bytes.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	return string(uri)
}

// login accepts any username with the demo password.
func (d *DemoOrigin) login(ctx *fasthttp.RequestCtx) {
	f, err := readFields(ctx)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"malformed body"}`)
		return
	}
	if subtle.ConstantTimeCompare([]byte(f["password"]), []byte(demoPassword)) != 1 {
		writeJSON(ctx, fasthttp.StatusUnauthorized, `{"error":"invalid credentials"}`)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
}

// otpSend opens a challenge for the phone and, being a demo, tells its code.
func (d *DemoOrigin) otpSend(ctx *fasthttp.RequestCtx) {
	f, err := readFields(ctx)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"malformed body"}`)
		return
	}
	phone := phoneDigits(f["phone"])
	if phone == "" {
		writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"missing phone"}`)
		return
	}
	c := &demoChallenge{
		id:      rand.Text(),
		phone:   phone,
		code:    randomCode(),
		expires: d.now().Add(demoChallengeTTL),
	}
	d.addChallenge(c)
	writeJSONValue(ctx, fasthttp.StatusOK, struct {
		ChallengeID string `json:"challenge_id"`
		DemoCode    string `json:"demo_code"`
	}{c.id, c.code})
}

// otpVerify consumes a matching, unexpired challenge. A wrong code leaves
// the challenge in place: limiting guesses is the edge's job.
func (d *DemoOrigin) otpVerify(ctx *fasthttp.RequestCtx) {
	f, err := readFields(ctx)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"malformed body"}`)
		return
	}
	if !d.verifyChallenge(f["challenge_id"], phoneDigits(f["phone"]), f["code"]) {
		writeJSON(ctx, fasthttp.StatusUnauthorized, `{"error":"invalid code"}`)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
}

// addChallenge stores c, dropping expired challenges and, when full, the
// oldest ones. Challenges share one TTL, so oldest first is expiry order.
func (d *DemoOrigin) addChallenge(c *demoChallenge) {
	now := d.now()
	d.otpMu.Lock()
	defer d.otpMu.Unlock()
	for e := d.order.Front(); e != nil; e = d.order.Front() {
		old := e.Value.(*demoChallenge)
		if len(d.challenges) < d.maxChallenges && now.Before(old.expires) {
			break
		}
		d.order.Remove(e)
		delete(d.challenges, old.id)
	}
	d.challenges[c.id] = d.order.PushBack(c)
}

// verifyChallenge reports whether id names an unexpired challenge for phone
// with code, and consumes it if so.
func (d *DemoOrigin) verifyChallenge(id, phone, code string) bool {
	now := d.now()
	d.otpMu.Lock()
	defer d.otpMu.Unlock()
	e, ok := d.challenges[id]
	if !ok {
		return false
	}
	c := e.Value.(*demoChallenge)
	if !now.Before(c.expires) {
		d.order.Remove(e)
		delete(d.challenges, id)
		return false
	}
	if phone != c.phone || subtle.ConstantTimeCompare([]byte(code), []byte(c.code)) != 1 {
		return false
	}
	d.order.Remove(e)
	delete(d.challenges, id)
	return true
}

// phoneDigits keeps the digits of a phone number, so "+1 (202) 555-0143"
// and "+12025550143" name the same phone. Full E.164 normalisation is the
// edge's business (otp/); the origin only needs send and verify to agree.
func phoneDigits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// randomCode returns a uniformly random 6-digit code.
func randomCode() string {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+).
		panic(fmt.Sprintf("reading random code: %v", err))
	}
	return fmt.Sprintf("%06d", n.Int64())
}

var errMalformedBody = errors.New("malformed body")

// readFields returns the string fields of a JSON object body, or of a form
// (urlencoded or multipart) body. JSON numbers and booleans are kept in
// their JSON spelling, so {"code": 123456} works like {"code": "123456"}.
func readFields(ctx *fasthttp.RequestCtx) (map[string]string, error) {
	ct := ctx.Request.Header.ContentType()
	body := ctx.PostBody()
	switch {
	case bytes.Contains(ct, []byte("json")) ||
		(len(ct) == 0 && len(bytes.TrimSpace(body)) > 0 && bytes.TrimSpace(body)[0] == '{'):
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, errMalformedBody
		}
		f := make(map[string]string, len(raw))
		for k, v := range raw {
			var s string
			if err := json.Unmarshal(v, &s); err == nil {
				f[k] = s
				continue
			}
			if t := bytes.TrimSpace(v); len(t) > 0 && t[0] != '{' && t[0] != '[' && !bytes.Equal(t, []byte("null")) {
				f[k] = string(t)
			}
		}
		return f, nil
	case bytes.HasPrefix(ct, []byte("multipart/form-data")):
		form, err := ctx.MultipartForm()
		if err != nil {
			return nil, errMalformedBody
		}
		f := make(map[string]string, len(form.Value))
		for k, v := range form.Value {
			if len(v) > 0 {
				f[k] = v[0]
			}
		}
		return f, nil
	default:
		args := ctx.PostArgs()
		f := make(map[string]string, args.Len())
		for k, v := range args.All() {
			if _, dup := f[string(k)]; !dup {
				f[string(k)] = string(v)
			}
		}
		return f, nil
	}
}

// writeJSON answers with a literal JSON body.
func writeJSON(ctx *fasthttp.RequestCtx, status int, body string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	ctx.SetBodyString(body)
}

// writeJSONValue answers with v encoded as JSON.
func writeJSONValue(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only the package's own maps and structs get here.
		panic(fmt.Sprintf("encoding demo origin response: %v", err))
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-store")
	ctx.SetBody(b)
}

// newDemoServer returns the fasthttp server for d.
func newDemoServer(d *DemoOrigin) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      d.Handler,
		ReadBufferSize:               16 << 10, // above the edge's 8 KiB header cap
		ReadTimeout:                  10 * time.Second,
		WriteTimeout:                 10 * time.Second,
		IdleTimeout:                  60 * time.Second,
		MaxRequestBodySize:           demoMaxBodyBytes,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		CloseOnShutdown:              true,
	}
}

// Serve serves d on ln until ctx is done, then shuts down, waiting up to a
// few seconds for requests in flight. It closes ln. It returns nil after a
// shutdown caused by ctx, and the listener's error otherwise.
func (d *DemoOrigin) Serve(ctx context.Context, ln net.Listener) error {
	srv := newDemoServer(d)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		if err == nil {
			return nil
		}
		return fmt.Errorf("serving demo origin: %w", err)
	case <-ctx.Done():
	}

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), demoShutdownTimeout)
	defer cancel()
	err := shutdownErr(srv.ShutdownWithContext(sctx))
	// Shutdown before Serve registered ln leaves ln open; closing it here
	// makes Serve return either way.
	_ = ln.Close()
	<-errc
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("shutting down demo origin: %w", err)
	}
	return nil
}

// ServeDemoOrigin listens on addr and serves d until ctx is done.
func ServeDemoOrigin(ctx context.Context, addr string, d *DemoOrigin) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for demo origin: %w", err)
	}
	return d.Serve(ctx, ln)
}
