package ext

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/rules"
)

// Extension is a feature's HTTP half (see the package doc), one value per
// Server.
type Extension interface {
	// Name names the extension in errors ("nat"), as its rules.Feature.
	Name() string
	// Open returns the extension's part in serving p, nil (and no error)
	// when p does not use the feature. The gateway calls it at New and at
	// every reload, before p serves a request; an error refuses p (New
	// fails, a reload keeps the policy it had).
	Open(p *rules.Policy, env *Env) (Instance, error)
}

// Instance is an extension's part in serving one policy: a value that
// implements any of Decider, Forwarder, Settler, Responder,
// DecideAnswerer and Explainer. It serves every request of its policy
// concurrently: what it keeps per request lives in the request (a memo
// slot of Request.Scratch, a Request.Buffer).
type Instance any

// Env is what Open may use of the gateway.
type Env struct {
	// Log is the node's logger.
	Log *slog.Logger
	// Counters are the extension's counters (Counted), in the order it
	// named them; nil when it names none.
	Counters []Counter

	buffers int // the policy's Request buffers so far (Buffer)
}

// Buffer hands out a request buffer for the policy being opened: the
// number to pass Request.Buffer. Like a memo slot (rules.Compiler.Slot),
// the buffer is the request's own and reused from request to request.
func (e *Env) Buffer() int {
	e.buffers++
	return e.buffers - 1
}

// Buffers is how many buffers Buffer has handed out (the gateway's).
func (e *Env) Buffers() int { return e.buffers }

// Counter is a counter an extension counts with (a Prometheus counter).
type Counter interface{ Inc() }

// Metric names an extension's counter and says what it counts.
type Metric struct{ Name, Help string }

// Counted is an Extension with counters of its own: the gateway registers
// one per Metric at New, whatever the policy, and hands them to Open in
// Env.Counters.
type Counted interface {
	Counters() []Metric
}

// ConnWrapper is an Extension that sees the TLS listener's connections
// under TLS, as the handshake reads them (ja4 records the ClientHello).
// The gateway wraps each accepted connection before tls.Server; the TLS
// connection's NetConn is the wrapper. A connection the request then
// reads from (Request.Ctx.Conn()) is the TLS connection.
type ConnWrapper interface {
	WrapConn(raw net.Conn) net.Conn
}

// Forgiver is an Extension whose identity an operator names, in POST
// /admin/forgive, by a value of another form than its characteristic's
// text (a visitor cookie for the visitor characteristic). It answers for
// policies without the feature too (its instance nil).
type Forgiver interface {
	// ForgiveNames returns the name the value is given under ("visitor")
	// and those of the values that only qualify it ("visitor_ip"): never
	// identities of their own, given only with name.
	ForgiveNames() (name string, aux []string)
	// ForgiveText returns the characteristic's text form of value
	// (rules.TextCharacteristic), reading its aux values from given; inst
	// is the extension's instance for the running policy, nil without one.
	// An error is the operator's (a 400), its text the answer.
	ForgiveText(inst Instance, value string, given map[string]string, now time.Time) (string, error)
}

// Pardoner is an Extension that carries out an operator's forgive (POST
// /admin/forgive, docs/operations.md "Forgive"; behaviour/forgive's): a
// gateway without one refuses the endpoint. Errors are the operator's
// (a 400, their text the answer) unless the store's.
type Pardoner interface {
	// MaxExempt is the longest exemption Forgive grants.
	MaxExempt() time.Duration
	// KeyFromText returns the counter key of p's rule r for the values an
	// operator gives by characteristic name, as r's key names them.
	KeyFromText(e *rules.Engine, p *rules.Policy, r *rules.Rule, values map[string]string) (rules.Key, error)
	// Forgive clears that key's counter at now, in the store e decides
	// with, and with exempt > 0 exempts the key from r until until. key is
	// zero when nothing was cleared (KeyFromText's error, or the store's);
	// with a key and an error, the exemption failed.
	Forgive(ctx context.Context, e *rules.Engine, now time.Time, p *rules.Policy, r *rules.Rule, values map[string]string, exempt time.Duration) (key rules.Key, until time.Time, err error)
	// ExemptFrom notes on e an exemption of p's rule name until until,
	// made elsewhere in the fleet (read from its shared record).
	ExemptFrom(e *rules.Engine, p *rules.Policy, name string, until, now time.Time)
}

// Request is a request as the hooks see it: the gateway's pooled memory,
// valid during the hook only.
type Request struct {
	// Ctx is fasthttp's context of the request: its header, its
	// connection. On the proxy listener, OnForward's req and OnResponse's
	// resp are Ctx's.
	Ctx *fasthttp.RequestCtx
	// Policy is the policy deciding the request.
	Policy *rules.Policy
	// Peer is the socket peer, unmapped.
	Peer netip.Addr
	// Now is the time the request is decided at.
	Now time.Time
	// Rules is the request as rules read it; Scratch its memo slots,
	// matches and results; Decision the Engine's (from OnForward on).
	Rules    *rules.Request
	Scratch  *rules.Scratch
	Decision *rules.Decision
	// Storable, from OnOrigin on, reports an answer a shared cache may
	// store: no client's state (a new visitor cookie) goes on it.
	Storable bool
	// Buf is where a hook renders a header value: anyone's after the
	// hook returns.
	Buf []byte

	buffers [][]byte
}

// Buffer returns the request's buffer i (Env.Buffer), empty at first and
// kept, with what it holds, from hook to hook of the request, and its
// capacity from request to request.
func (r *Request) Buffer(i int) *[]byte { return &r.buffers[i] }

// Reset prepares r for a request of a policy with n buffers (Env.Buffers),
// keeping the buffers' capacity (the gateway's).
func (r *Request) Reset(n int) {
	bufs := r.buffers
	if cap(bufs) < n {
		bufs = append(bufs[:cap(bufs)], make([][]byte, n-cap(bufs))...)
	}
	bufs = bufs[:n]
	for i := range bufs {
		bufs[i] = bufs[i][:0]
	}
	*r = Request{Buf: r.Buf, buffers: bufs}
}

// Decider reads the request before the Engine decides it (package doc,
// phase 1).
type Decider interface {
	BeforeDecide(r *Request)
}

// Forwarder adds to the request the origin receives (phase 2).
type Forwarder interface {
	OnForward(r *Request, req *fasthttp.Request)
}

// Settler sees the origin's answer before Settle (phase 3): true asks
// for Engine.Settle's call (the feature's rules.RequestSettler adds its
// ops to it).
type Settler interface {
	OnOrigin(r *Request, resp *fasthttp.Response) (settle bool)
}

// Responder adds to the client's response after Settle (phase 4).
type Responder interface {
	OnResponse(r *Request, resp *fasthttp.Response)
}

// DecideAnswerer adds to the decision-only listener's 200, which lets the
// described request through: what OnForward and OnResponse would add, for
// the proxy in front to copy.
type DecideAnswerer interface {
	OnDecideAllow(r *Request, h *fasthttp.ResponseHeader)
}

// Field is one field of POST /admin/explain's answer.
type Field struct {
	Name  string
	Value any // encoded as JSON
}

// Explainer adds to POST /admin/explain's answer (after the request was
// explained: Decision set): fields appended to dst, after the gateway's
// own. It may allocate.
type Explainer interface {
	Explain(r *Request, dst []Field) []Field
}
