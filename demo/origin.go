package demo

import (
	"bytes"
	"container/list"
	"crypto/subtle"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Demo origin limits. The origin is a test and demo fixture, but it listens
// on a socket, so everything it keeps is bounded.
const (
	// password is the one password /login accepts, whatever the username.
	password = "letmein-demo"
	// challengeTTL is how long an OTP challenge can be verified.
	challengeTTL = 10 * time.Minute
	// defaultMaxChallenges bounds the pending OTP challenges; the oldest is
	// dropped first.
	defaultMaxChallenges = 100_000
	// defaultMaxHitPaths bounds the distinct paths /__origin/hits reports; a
	// new path beyond it is not recorded (its request is still answered).
	defaultMaxHitPaths = 10_000
	// maxBodyBytes caps request bodies read by the demo server.
	maxBodyBytes = 1 << 20
	// shutdownTimeout bounds how long Serve waits for in-flight requests
	// once its context is done.
	shutdownTimeout = 5 * time.Second
)

// Request describes one request as the demo origin received it. It is
// the body of GET /__origin/last.
type Request struct {
	// Method is the request line's method.
	Method string `json:"method"`
	// Path is the request line's path exactly as sent (no normalisation,
	// no query string).
	Path string `json:"path"`
	// Headers holds every request header under its canonical name; repeated
	// headers are joined with ", ".
	Headers map[string]string `json:"headers"`
}

// Origin is the built-in demo origin that `edge -demo` and
// `edge demo-origin` serve behind the edge. Besides the demo endpoints it
// records, per raw request path, how many requests reached it, so tests can
// check what the edge forwarded.
//
// An Origin is safe for concurrent use.
type Origin struct {
	// now is the clock for OTP expiry; tests replace it.
	now func() time.Time
	// maxChallenges, maxHitPaths and maxHeld are the bounds; tests lower
	// them.
	maxChallenges, maxHitPaths, maxHeld int

	// ctl is the hold, latency and in-flight controls' state (hold.go).
	ctl control

	mu   sync.Mutex
	hits map[string]int64
	last *Request

	otpMu      sync.Mutex
	challenges map[string]*list.Element // of *challenge, by ID
	order      list.List                // of *challenge, oldest first
}

// New returns an empty demo origin.
func New() *Origin {
	return &Origin{
		now:           time.Now,
		maxChallenges: defaultMaxChallenges,
		maxHitPaths:   defaultMaxHitPaths,
		maxHeld:       defaultMaxHeld,
		hits:          make(map[string]int64),
		challenges:    make(map[string]*list.Element),
	}
}

// Hits returns a copy of the request counts per raw path.
func (o *Origin) Hits() map[string]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]int64, len(o.hits))
	for p, n := range o.hits {
		out[p] = n
	}
	return out
}

// Last returns the last counted request, and false when there was none
// since the origin started or was reset.
func (o *Origin) Last() (Request, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		return Request{}, false
	}
	return *o.last, true // Headers is never written after record
}

// Reset forgets the recorded hits and the last request. Pending OTP
// challenges are kept.
func (o *Origin) Reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.hits)
	o.last = nil
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
func (o *Origin) Handler(ctx *fasthttp.RequestCtx) {
	if p, ok := strings.CutPrefix(string(ctx.Path()), "/__origin/"); ok {
		o.serveControl(ctx, p)
		return
	}
	o.record(ctx)

	path := normalise(string(ctx.Path()))
	defer o.leave(path)
	if !o.waitTurn(ctx, path) { // held or delayed as the controls say (hold.go)
		return
	}

	method := effectiveMethod(&ctx.Request.Header)
	switch {
	case path == "/login" && method == fasthttp.MethodPost:
		o.login(ctx)
	case path == "/signup" && method == fasthttp.MethodPost:
		writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
	case path == "/otp/send" && method == fasthttp.MethodPost:
		o.otpSend(ctx)
	case path == "/otp/verify" && method == fasthttp.MethodPost:
		o.otpVerify(ctx)
	case path == "/api/export":
		exportCost(ctx)
	case underPrefix(path, "/api"), underPrefix(path, "/trace"):
		writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
	default:
		writeJSON(ctx, fasthttp.StatusNotFound, `{"error":"not found"}`)
	}
}

// exportCost answers /api/export, a variable-cost call: X-Actual-Cost
// names what the export really cost, for an edge rule's settle_from
// (docs/policy.md, "cost"). The cost is the query's cost parameter as sent
// (so a test can make the origin name any value, valid or not), 10 without
// one.
func exportCost(ctx *fasthttp.RequestCtx) {
	cost := ctx.QueryArgs().Peek("cost")
	if cost == nil {
		cost = []byte("10")
	}
	ctx.Response.Header.SetBytesV("X-Actual-Cost", cost)
	writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
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
func (o *Origin) serveControl(ctx *fasthttp.RequestCtx, p string) {
	if len(ctx.Request.Header.Peek(fasthttp.HeaderXForwardedFor)) > 0 {
		writeJSON(ctx, fasthttp.StatusNotFound, `{"error":"not found"}`)
		return
	}
	switch {
	case p == "hits" && ctx.IsGet():
		writeJSONValue(ctx, fasthttp.StatusOK, o.Hits())
	case p == "last" && ctx.IsGet():
		last, ok := o.Last()
		if !ok {
			writeJSON(ctx, fasthttp.StatusNotFound, `{"error":"no request yet"}`)
			return
		}
		writeJSONValue(ctx, fasthttp.StatusOK, last)
	case p == "reset" && ctx.IsPost():
		o.Reset()
		writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
	case o.serveHoldControl(ctx, p): // hold.go
	default:
		writeJSON(ctx, fasthttp.StatusNotFound, `{"error":"not found"}`)
	}
}

// record counts the request under its raw path and keeps it as the last one.
func (o *Origin) record(ctx *fasthttp.RequestCtx) {
	req := Request{
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

	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.hits[req.Path]; ok || len(o.hits) < o.maxHitPaths {
		o.hits[req.Path]++
	}
	o.last = &req
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
func (o *Origin) login(ctx *fasthttp.RequestCtx) {
	f, err := readFields(ctx)
	if err != nil {
		writeJSON(ctx, fasthttp.StatusBadRequest, `{"error":"malformed body"}`)
		return
	}
	if subtle.ConstantTimeCompare([]byte(f["password"]), []byte(password)) != 1 {
		writeJSON(ctx, fasthttp.StatusUnauthorized, `{"error":"invalid credentials"}`)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, `{"ok":true}`)
}
