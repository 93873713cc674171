package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// The attacks scenario writes its requests byte for byte: header names in
// any spelling ("X_HTTP_Method_Override"), a header twice, an absolute-form
// target, a path no client library would leave alone ("/./login",
// "/login;x"). An HTTP client would normalise some of them away, so each
// request is written as raw HTTP/1.1 on a connection of its own and the
// answer is read with fasthttp's response parser.

// header is one request header line, name as sent.
type header struct{ name, value string }

// rawRequest is one request as it goes on the wire.
type rawRequest struct {
	method  string
	target  string // the request-target, as sent: "/login", "http://other/login"
	headers []header
	body    []byte
	// tag, when not empty, is sent as X-Attack-Request so the request can
	// be recognised in the origin's /__origin/last.
	tag string
}

// attackTagHeader carries a request's tag to the origin.
const attackTagHeader = "X-Attack-Request"

// add appends a header line.
func (r *rawRequest) add(name, value string) *rawRequest {
	r.headers = append(r.headers, header{name, value})
	return r
}

// wire returns the request's bytes: the request line, the headers in
// order, the tag, Content-Length when there is a body, and the body.
func (r *rawRequest) wire() []byte {
	var b strings.Builder
	b.WriteString(r.method)
	b.WriteByte(' ')
	b.WriteString(r.target)
	b.WriteString(" HTTP/1.1\r\n")
	for _, h := range r.headers {
		b.WriteString(h.name)
		b.WriteString(": ")
		b.WriteString(h.value)
		b.WriteString("\r\n")
	}
	if r.tag != "" {
		b.WriteString(attackTagHeader + ": " + r.tag + "\r\n")
	}
	if len(r.body) > 0 || r.method == fasthttp.MethodPost {
		b.WriteString("Content-Length: " + strconv.Itoa(len(r.body)) + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(r.body)
	return []byte(b.String())
}

// rawAnswer is what the edge answered.
type rawAnswer struct {
	status int
	body   []byte
	cookie string // the visitor cookie the answer sets, "" for none
}

// rawConn is one connection to the edge (or the origin), used by one
// goroutine, opened from a chosen local address when local is valid (an
// untrusted peer: any 127.0.0.0/8 address on Linux). A request that fails
// is never retried: a retry of one that arrived would count twice.
type rawConn struct {
	addr    string
	local   netip.Addr
	timeout time.Duration
	cookie  string // the visitor cookie's name, to read Set-Cookie

	c  net.Conn
	br *bufio.Reader
}

func newRawConn(addr string, local netip.Addr, timeout time.Duration, cookie string) *rawConn {
	return &rawConn{addr: addr, local: local, timeout: timeout, cookie: cookie}
}

func (c *rawConn) close() {
	if c.c != nil {
		c.c.Close()
		c.c, c.br = nil, nil
	}
}

// dial opens the connection if it is not open.
func (c *rawConn) dial(ctx context.Context) error {
	if c.c != nil {
		return nil
	}
	d := net.Dialer{Timeout: c.timeout}
	if c.local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: c.local.AsSlice()}
	}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		if c.local.IsValid() {
			return fmt.Errorf("connecting to %s from %s: %w", c.addr, c.local, err)
		}
		return fmt.Errorf("connecting to %s: %w", c.addr, err)
	}
	c.c, c.br = conn, bufio.NewReader(conn)
	return nil
}

// do sends r and reads the answer. It fails once ctx is done.
func (c *rawConn) do(ctx context.Context, r *rawRequest) (rawAnswer, error) {
	if err := ctx.Err(); err != nil {
		return rawAnswer{}, fmt.Errorf("the -duration budget is spent: %w", err)
	}
	if err := c.dial(ctx); err != nil {
		return rawAnswer{}, err
	}
	deadline := time.Now().Add(c.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.c.SetDeadline(deadline)
	if _, err := c.c.Write(r.wire()); err != nil {
		c.close()
		return rawAnswer{}, fmt.Errorf("%s %s: %w", r.method, r.target, err)
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if r.method == fasthttp.MethodHead {
		resp.SkipBody = true
	}
	if err := resp.Read(c.br); err != nil {
		c.close()
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			err = fmt.Errorf("no answer within %v: %w", c.timeout, err)
		}
		return rawAnswer{}, fmt.Errorf("%s %s: %w", r.method, r.target, err)
	}
	a := rawAnswer{status: resp.StatusCode(), body: append([]byte(nil), resp.Body()...)}
	if c.cookie != "" {
		ck := fasthttp.AcquireCookie()
		ck.SetKey(c.cookie)
		if resp.Header.Cookie(ck) && len(ck.Value()) > 0 {
			a.cookie = string(ck.Value())
		}
		fasthttp.ReleaseCookie(ck)
	}
	if resp.ConnectionClose() {
		c.close()
	}
	return a, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// originView reads what reached the demo origin, on its own port (through
// the edge its hooks answer 404).
type originView struct {
	c *rawConn
}

func newOriginView(origin target, timeout time.Duration) *originView {
	return &originView{c: newRawConn(origin.addr, netip.Addr{}, timeout, "")}
}

func (o *originView) close() { o.c.close() }

func (o *originView) get(ctx context.Context, path string) (int, []byte, error) {
	r := &rawRequest{method: fasthttp.MethodGet, target: path}
	r.add("Host", o.c.addr)
	a, err := o.c.do(ctx, r)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the origin's %s: %w", path, err)
	}
	return a.status, a.body, nil
}

// hits returns the origin's request counts by raw path.
func (o *originView) hits(ctx context.Context) (otpHits, error) {
	status, body, err := o.get(ctx, "/__origin/hits")
	if err != nil {
		return nil, err
	}
	if status != fasthttp.StatusOK {
		return nil, fmt.Errorf("reading the origin's hits: GET /__origin/hits answered %d: is -origin the demo origin?", status)
	}
	var h otpHits
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, fmt.Errorf("reading the origin's hits: %w", err)
	}
	return h, nil
}

// originRequest is the origin's /__origin/last: the last request it
// received.
type originRequest struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
}

// header returns the values of the headers whose names equal name as a
// CGI origin compares them (headerNamesMatch), joined by ", ".
func (r originRequest) header(name string) string {
	var vs []string
	for k, v := range r.Headers {
		if headerNamesMatch(k, name) {
			vs = append(vs, v)
		}
	}
	return strings.Join(vs, ", ")
}

// headerNamesMatch compares header names as CGI, PHP, WSGI and Rack
// origins do (RFC 3875 §4.1.18: HTTP_ and the name with "-" as "_"; PHP
// also turns "." and " " into "_"): case ignored, and every byte but a
// letter or a digit read as "-".
func headerNamesMatch(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		if cgiNameByte(a[i]) != cgiNameByte(b[i]) {
			return false
		}
	}
	return true
}

// cgiNameByte is c as a CGI origin's header name has it.
func cgiNameByte(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return c
	}
	return '-'
}

// last returns the origin's last request; ok is false when it has had
// none.
func (o *originView) last(ctx context.Context) (req originRequest, ok bool, err error) {
	status, body, err := o.get(ctx, "/__origin/last")
	if err != nil {
		return originRequest{}, false, err
	}
	switch status {
	case fasthttp.StatusOK:
	case fasthttp.StatusNotFound:
		return originRequest{}, false, nil
	default:
		return originRequest{}, false, fmt.Errorf("reading the origin's last request: GET /__origin/last answered %d: is -origin the demo origin?", status)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return originRequest{}, false, fmt.Errorf("reading the origin's last request: %w", err)
	}
	return req, true, nil
}

// reached returns the origin's last request when it is the one tagged
// tag: the request reached the origin.
func (o *originView) reached(ctx context.Context, tag string) (originRequest, bool, error) {
	req, ok, err := o.last(ctx)
	if err != nil || !ok {
		return originRequest{}, false, err
	}
	if req.header(attackTagHeader) != tag {
		return originRequest{}, false, nil
	}
	return req, true, nil
}

// hitsDelta returns how many requests reached the origin between two
// readings of its counts, over every path, or only paths keep accepts
// when keep is not nil; an error when a count went down (the origin was
// reset or restarted meanwhile).
func hitsDelta(before, after otpHits, keep func(path string) bool) (int64, error) {
	var n int64
	for p, c := range after {
		if keep != nil && !keep(p) {
			continue
		}
		d := c - before[p]
		if d < 0 {
			return 0, fmt.Errorf("the origin's count of %s went down from %d to %d during the run: it was reset or restarted; run again", p, before[p], c)
		}
		n += d
	}
	for p := range before {
		if _, ok := after[p]; !ok && (keep == nil || keep(p)) {
			return 0, fmt.Errorf("the origin's count of %s disappeared during the run: it was reset or restarted; run again", p)
		}
	}
	return n, nil
}
