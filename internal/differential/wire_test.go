package differential

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// request is one corpus request, as bytes on the wire: the harness writes
// it itself (rawRequest) so that it can send what no HTTP client would, two
// Content-Type headers, a body with no Content-Type, a header spelled
// oddly.
type request struct {
	Method  string      // "POST" when empty
	Query   string      // the raw query, without '?'
	Header  [][2]string // sent in order, as written (Host, framing and the nonce are added)
	Body    []byte
	Chunked bool // Transfer-Encoding: chunked instead of Content-Length
	Framed  bool // Header and Body carry their own framing: nothing is added
}

func (r request) method() string {
	if r.Method == "" {
		return "POST"
	}
	return r.Method
}

// withHeader returns r with the header name: value appended.
func (r request) withHeader(name, value string) request {
	r.Header = append(append([][2]string(nil), r.Header...), [2]string{name, value})
	return r
}

// header returns the first value of the header name (case-insensitive).
func (r request) header(name string) (string, bool) {
	for _, h := range r.Header {
		if strings.EqualFold(h[0], name) {
			return h[1], true
		}
	}
	return "", false
}

// nonceHeader is part of every rule's key in the harness's policy
// (testdata/policy.hcl): each send and its probes carry their own nonce,
// so no counter is shared between sends.
const nonceHeader = "X-Differential-Send"

// rawRequest renders r for path with the send's nonce, on a connection that
// closes after the answer.
func rawRequest(r request, path, nonce string) []byte {
	var b bytes.Buffer
	target := path
	if r.Query != "" {
		target += "?" + r.Query
	}
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: differential.test\r\n%s: %s\r\n", r.method(), target, nonceHeader, nonce)
	for _, h := range r.Header {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	switch {
	case r.Framed:
	case r.Chunked:
		b.WriteString("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
		if len(r.Body) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(r.Body), r.Body)
		}
		b.WriteString("0\r\n\r\n")
		return b.Bytes()
	case len(r.Body) > 0 || r.method() != "GET":
		b.WriteString("Content-Length: " + strconv.Itoa(len(r.Body)) + "\r\n")
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.Write(r.Body)
	return b.Bytes()
}

// reply is an answer read off the wire.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// ioTimeout bounds one exchange so that a wedged origin fails the test
// instead of hanging it; no verdict depends on it.
const ioTimeout = 20 * time.Second

// exchange sends raw to addr on a new connection and reads the answer.
func exchange(addr string, raw []byte) (reply, error) {
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return reply{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return reply{}, err
	}
	if _, err := conn.Write(raw); err != nil {
		return reply{}, fmt.Errorf("writing the request: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	// Interim answers (100 Continue to an Expect) precede the answer.
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		return reply{}, fmt.Errorf("reading the answer: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("reading the answer's body: %w", err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// quoteRequest renders a raw request for a log: Go-quoted, so NULs, BOMs
// and invalid UTF-8 show, cut at max bytes of body.
func quoteRequest(raw []byte) string {
	const max = 600
	s := raw
	cut := ""
	if len(s) > max {
		s, cut = s[:max], fmt.Sprintf(" …(%d more bytes)", len(raw)-max)
	}
	return strconv.Quote(string(s)) + cut
}
