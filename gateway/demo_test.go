package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// demoClock is a settable clock for OTP expiry.
type demoClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *demoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *demoClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// startDemo serves a fresh demo origin on a loopback port and returns its
// base URL. The server stops when the test ends.
func startDemo(t *testing.T, d *DemoOrigin) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v, want nil after cancel", err)
		}
	})
	return "http://" + ln.Addr().String()
}

type demoResponse struct {
	status int
	body   string
}

// call sends one request with Go's client. A rawPath is put on the request
// line as is.
func call(t *testing.T, base, method, rawPath string, header http.Header, body io.Reader) demoResponse {
	t.Helper()
	u, err := url.Parse(base + rawPath)
	if err != nil {
		t.Fatalf("parsing %q: %v", base+rawPath, err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u.String(), body)
	if err != nil {
		t.Fatalf("building request: %v", err)
	}
	maps.Copy(req.Header, header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawPath, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return demoResponse{resp.StatusCode, string(b)}
}

func jsonBody(t *testing.T, v any) (http.Header, io.Reader) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(b)
}

func formBody(v url.Values) (http.Header, io.Reader) {
	return http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, strings.NewReader(v.Encode())
}

func multipartBody(t *testing.T, v map[string]string) (http.Header, io.Reader) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, val := range v {
		if err := w.WriteField(k, val); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return http.Header{"Content-Type": {w.FormDataContentType()}}, &buf
}

func TestDemoEndpoints(t *testing.T) {
	t.Parallel()
	base := startDemo(t, NewDemoOrigin())

	type body func(t *testing.T) (http.Header, io.Reader)
	none := func(*testing.T) (http.Header, io.Reader) { return nil, nil }
	asJSON := func(v any) body { return func(t *testing.T) (http.Header, io.Reader) { return jsonBody(t, v) } }
	asForm := func(v url.Values) body { return func(*testing.T) (http.Header, io.Reader) { return formBody(v) } }
	tests := []struct {
		name       string
		method     string
		path       string
		body       body
		header     http.Header
		wantStatus int
		wantBody   string
	}{
		{"login json ok", "POST", "/login", asJSON(map[string]string{"username": "alice", "password": "letmein-demo"}), nil, 200, `{"ok":true}`},
		{"login json any user", "POST", "/login", asJSON(map[string]string{"username": "", "password": "letmein-demo"}), nil, 200, `{"ok":true}`},
		{"login json wrong", "POST", "/login", asJSON(map[string]string{"username": "alice", "password": "nope"}), nil, 401, `{"error":"invalid credentials"}`},
		{"login json missing password", "POST", "/login", asJSON(map[string]string{"username": "alice"}), nil, 401, `{"error":"invalid credentials"}`},
		{"login json malformed", "POST", "/login", func(*testing.T) (http.Header, io.Reader) {
			return http.Header{"Content-Type": {"application/json"}}, strings.NewReader(`{"password":`)
		}, nil, 400, `{"error":"malformed body"}`},
		{"login form ok", "POST", "/login", asForm(url.Values{"username": {"bob"}, "password": {"letmein-demo"}}), nil, 200, `{"ok":true}`},
		{"login form wrong", "POST", "/login", asForm(url.Values{"username": {"bob"}, "password": {"letmein"}}), nil, 401, `{"error":"invalid credentials"}`},
		{"login multipart ok", "POST", "/login", func(t *testing.T) (http.Header, io.Reader) {
			return multipartBody(t, map[string]string{"username": "carol", "password": "letmein-demo"})
		}, nil, 200, `{"ok":true}`},
		{"login get", "GET", "/login", none, nil, 404, `{"error":"not found"}`},
		{"login method override", "PUT", "/login", asForm(url.Values{"password": {"letmein-demo"}}),
			http.Header{"X-Http-Method-Override": {"post"}}, 200, `{"ok":true}`},
		{"signup", "POST", "/signup", asJSON(map[string]string{"username": "dave"}), nil, 200, `{"ok":true}`},
		{"api get", "GET", "/api/v1/items", none, nil, 200, `{"ok":true}`},
		{"api delete", "DELETE", "/api/v1/items", none, nil, 200, `{"ok":true}`},
		{"api root", "GET", "/api", none, nil, 200, `{"ok":true}`},
		{"api prefix only", "GET", "/apix", none, nil, 404, `{"error":"not found"}`},
		{"login upper case", "POST", "/LOGIN", asForm(url.Values{"password": {"letmein-demo"}}), nil, 200, `{"ok":true}`},
		{"login trailing slash", "POST", "/Login/", asForm(url.Values{"password": {"letmein-demo"}}), nil, 200, `{"ok":true}`},
		{"otp verify trailing slash", "POST", "/otp/verify/", asForm(url.Values{"code": {"1"}}), nil, 401, `{"error":"invalid code"}`},
		{"api upper case", "GET", "/API/v1", none, nil, 200, `{"ok":true}`},
		{"trace", "GET", "/trace/gcra", none, nil, 200, `{"ok":true}`},
		{"unknown", "GET", "/nope", none, nil, 404, `{"error":"not found"}`},
		{"root", "GET", "/", none, nil, 404, `{"error":"not found"}`},
		{"origin unknown", "GET", "/__origin/nope", none, nil, 404, `{"error":"not found"}`},
		{"origin reset needs post", "GET", "/__origin/reset", none, nil, 404, `{"error":"not found"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, b := tt.body(t)
			if h == nil {
				h = http.Header{}
			}
			maps.Copy(h, tt.header)
			got := call(t, base, tt.method, tt.path, h, b)
			if got.status != tt.wantStatus || got.body != tt.wantBody {
				t.Errorf("%s %s: got %d %s, want %d %s", tt.method, tt.path, got.status, got.body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

func getHits(t *testing.T, base string) map[string]int64 {
	t.Helper()
	r := call(t, base, "GET", "/__origin/hits", nil, nil)
	if r.status != 200 {
		t.Fatalf("GET /__origin/hits: got status %d, want 200", r.status)
	}
	var hits map[string]int64
	if err := json.Unmarshal([]byte(r.body), &hits); err != nil {
		t.Fatalf("decoding hits %q: %v", r.body, err)
	}
	return hits
}

func TestDemoHitsRecordRawPath(t *testing.T) {
	t.Parallel()
	d := NewDemoOrigin()
	base := startDemo(t, d)

	paths := []string{"/login", "//login", "/%6Cogin", "/login?user=x", "/a/../login", "/api/A/", "/login"}
	for _, p := range paths {
		call(t, base, "POST", p, nil, nil)
	}
	call(t, base, "GET", "/__origin/last", nil, nil) // control paths are not counted

	want := map[string]int64{"/login": 3, "//login": 1, "/%6Cogin": 1, "/a/../login": 1, "/api/A/": 1}
	got := getHits(t, base)
	if !maps.Equal(got, want) {
		t.Errorf("hits: got %v, want %v", got, want)
	}
	if !maps.Equal(d.Hits(), want) {
		t.Errorf("Hits(): got %v, want %v", d.Hits(), want)
	}

	// Routing uses the normalised path: these are all logins.
	for _, p := range []string{"//login", "/%6Cogin", "/a/../login"} {
		h, b := formBody(url.Values{"password": {"letmein-demo"}})
		if r := call(t, base, "POST", p, h, b); r.status != 200 {
			t.Errorf("POST %s: got %d, want 200", p, r.status)
		}
	}
}

func TestDemoLastAndReset(t *testing.T) {
	t.Parallel()
	base := startDemo(t, NewDemoOrigin())

	if r := call(t, base, "GET", "/__origin/last", nil, nil); r.status != 404 {
		t.Errorf("last before any request: got %d, want 404", r.status)
	}

	h := http.Header{
		"User-Agent":    {"edge-test/1"},
		"x-lower-case":  {"v"}, // sent as is; the origin reports it canonical
		"X-Twice":       {"a", "b"},
		"Authorization": {"Bearer t"},
	}
	call(t, base, "POST", "/%6Cogin?next=/", h, strings.NewReader("x"))

	r := call(t, base, "GET", "/__origin/last", nil, nil)
	if r.status != 200 {
		t.Fatalf("GET /__origin/last: got %d, want 200", r.status)
	}
	var last DemoRequest
	if err := json.Unmarshal([]byte(r.body), &last); err != nil {
		t.Fatalf("decoding last %q: %v", r.body, err)
	}
	if last.Method != "POST" || last.Path != "/%6Cogin" {
		t.Errorf("last: got %s %s, want POST /%%6Cogin", last.Method, last.Path)
	}
	wantHeaders := map[string]string{
		"User-Agent":     "edge-test/1",
		"X-Lower-Case":   "v",
		"X-Twice":        "a, b",
		"Authorization":  "Bearer t",
		"Content-Length": "1",
	}
	for k, v := range wantHeaders {
		if last.Headers[k] != v {
			t.Errorf("last header %s: got %q, want %q (all: %v)", k, last.Headers[k], v, last.Headers)
		}
	}
	if !strings.HasPrefix(last.Headers["Host"], "127.0.0.1:") {
		t.Errorf("last header Host: got %q, want 127.0.0.1:port", last.Headers["Host"])
	}

	if r := call(t, base, "POST", "/__origin/reset", nil, nil); r.status != 200 {
		t.Fatalf("POST /__origin/reset: got %d, want 200", r.status)
	}
	if got := getHits(t, base); len(got) != 0 {
		t.Errorf("hits after reset: got %v, want {}", got)
	}
	if r := call(t, base, "GET", "/__origin/last", nil, nil); r.status != 404 {
		t.Errorf("last after reset: got %d, want 404", r.status)
	}
}

type sendResponse struct {
	ChallengeID string `json:"challenge_id"`
	DemoCode    string `json:"demo_code"`
}

func otpSend(t *testing.T, base string, phone string) sendResponse {
	t.Helper()
	h, b := jsonBody(t, map[string]string{"phone": phone})
	r := call(t, base, "POST", "/otp/send", h, b)
	if r.status != 200 {
		t.Fatalf("POST /otp/send: got %d %s, want 200", r.status, r.body)
	}
	var s sendResponse
	if err := json.Unmarshal([]byte(r.body), &s); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
	if s.ChallengeID == "" || len(s.DemoCode) != 6 || strings.Trim(s.DemoCode, "0123456789") != "" {
		t.Fatalf("POST /otp/send: got %+v, want a challenge ID and a 6-digit code", s)
	}
	return s
}

func otpVerify(t *testing.T, base string, f url.Values) int {
	t.Helper()
	h, b := formBody(f)
	return call(t, base, "POST", "/otp/verify", h, b).status
}

// otherCode returns a 6-digit code different from code.
func otherCode(code string) string {
	if code == "000000" {
		return "000001"
	}
	return "000000"
}

func TestDemoOTPRoundTrip(t *testing.T) {
	t.Parallel()
	base := startDemo(t, NewDemoOrigin())

	s := otpSend(t, base, "+1 202-555-0143")
	s2 := otpSend(t, base, "+12025550143")
	if s.ChallengeID == s2.ChallengeID {
		t.Errorf("two sends gave the same challenge ID %q", s.ChallengeID)
	}

	steps := []struct {
		name string
		form url.Values
		want int
	}{
		{"wrong code", url.Values{"phone": {"+12025550143"}, "challenge_id": {s.ChallengeID}, "code": {otherCode(s.DemoCode)}}, 401},
		{"wrong phone", url.Values{"phone": {"+12025550144"}, "challenge_id": {s.ChallengeID}, "code": {s.DemoCode}}, 401},
		{"unknown challenge", url.Values{"phone": {"+12025550143"}, "challenge_id": {"nope"}, "code": {s.DemoCode}}, 401},
		{"other challenge's code", url.Values{"phone": {"+12025550143"}, "challenge_id": {s2.ChallengeID}, "code": {otherCode(s2.DemoCode)}}, 401},
		{"right code, phone reformatted", url.Values{"phone": {"+12025550143"}, "challenge_id": {s.ChallengeID}, "code": {s.DemoCode}}, 200},
		{"consumed", url.Values{"phone": {"+12025550143"}, "challenge_id": {s.ChallengeID}, "code": {s.DemoCode}}, 401},
		{"second challenge still valid", url.Values{"phone": {"+1 (202) 555-0143"}, "challenge_id": {s2.ChallengeID}, "code": {s2.DemoCode}}, 200},
	}
	for _, st := range steps { // in order: each step sees the previous ones
		if got := otpVerify(t, base, st.form); got != st.want {
			t.Errorf("%s: got %d, want %d", st.name, got, st.want)
		}
	}

	// JSON verify, with the code as a JSON number.
	s3 := otpSend(t, base, "+447700900123")
	body := fmt.Sprintf(`{"phone":"+447700900123","challenge_id":%q,"code":%s}`, s3.ChallengeID, s3.DemoCode)
	if s3.DemoCode[0] == '0' { // a JSON number cannot start with 0
		body = fmt.Sprintf(`{"phone":"+447700900123","challenge_id":%q,"code":%q}`, s3.ChallengeID, s3.DemoCode)
	}
	r := call(t, base, "POST", "/otp/verify", http.Header{"Content-Type": {"application/json"}}, strings.NewReader(body))
	if r.status != 200 {
		t.Errorf("JSON verify: got %d %s, want 200", r.status, r.body)
	}

	h, b := jsonBody(t, map[string]string{"phone": ""})
	if r := call(t, base, "POST", "/otp/send", h, b); r.status != 400 {
		t.Errorf("send without phone: got %d, want 400", r.status)
	}
}

func TestDemoOTPExpiry(t *testing.T) {
	t.Parallel()
	clk := &demoClock{now: time.Unix(1_700_000_000, 0)}
	d := NewDemoOrigin()
	d.now = clk.Now
	base := startDemo(t, d)

	early := otpSend(t, base, "+12025550143")
	late := otpSend(t, base, "+12025550143")
	form := func(s sendResponse) url.Values {
		return url.Values{"phone": {"+12025550143"}, "challenge_id": {s.ChallengeID}, "code": {s.DemoCode}}
	}

	clk.Advance(demoChallengeTTL - time.Nanosecond)
	if got := otpVerify(t, base, form(early)); got != 200 {
		t.Errorf("verify just before expiry: got %d, want 200", got)
	}
	clk.Advance(time.Nanosecond)
	if got := otpVerify(t, base, form(late)); got != 401 {
		t.Errorf("verify at expiry: got %d, want 401", got)
	}
}

func TestDemoChallengesBounded(t *testing.T) {
	t.Parallel()
	clk := &demoClock{now: time.Unix(1_700_000_000, 0)}
	d := NewDemoOrigin()
	d.now = clk.Now
	d.maxChallenges = 100

	for i := range d.maxChallenges + 1 {
		d.addChallenge(&demoChallenge{id: fmt.Sprint(i), phone: "1", code: "123456", expires: clk.Now().Add(demoChallengeTTL)})
	}
	if got := len(d.challenges); got != d.maxChallenges {
		t.Errorf("challenges after overfill: got %d, want %d", got, d.maxChallenges)
	}
	if d.verifyChallenge("0", "1", "123456") {
		t.Errorf("oldest challenge survived overfill")
	}
	if !d.verifyChallenge("1", "1", "123456") {
		t.Errorf("second oldest challenge was dropped")
	}

	// Expired challenges go on the next send.
	clk.Advance(demoChallengeTTL)
	d.addChallenge(&demoChallenge{id: "new", phone: "1", code: "123456", expires: clk.Now().Add(demoChallengeTTL)})
	if got := len(d.challenges); got != 1 || d.order.Len() != 1 {
		t.Errorf("challenges after expiry: got %d (list %d), want 1", got, d.order.Len())
	}
}

func TestDemoHitsBounded(t *testing.T) {
	t.Parallel()
	d := NewDemoOrigin()
	d.maxHitPaths = 2
	base := startDemo(t, d)

	for _, p := range []string{"/api/a", "/api/b", "/api/c", "/api/a"} {
		if r := call(t, base, "GET", p, nil, nil); r.status != 200 {
			t.Errorf("GET %s: got %d, want 200 even past the bound", p, r.status)
		}
	}
	want := map[string]int64{"/api/a": 2, "/api/b": 1}
	if got := d.Hits(); !maps.Equal(got, want) {
		t.Errorf("hits: got %v, want %v", got, want)
	}
}

func TestDemoConcurrentHits(t *testing.T) {
	t.Parallel()
	d := NewDemoOrigin()
	base := startDemo(t, d)

	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				call(t, base, "GET", fmt.Sprintf("/api/w%d", w%2), nil, nil)
			}
		})
	}
	wg.Wait()
	want := map[string]int64{"/api/w0": workers / 2 * each, "/api/w1": workers / 2 * each}
	if got := d.Hits(); !maps.Equal(got, want) {
		t.Errorf("hits: got %v, want %v", got, want)
	}
}

func TestRawPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		uri, want string
	}{
		{"/login", "/login"},
		{"/login?x=1", "/login"},
		{"//login", "//login"},
		{"/%6Cogin?a", "/%6Cogin"},
		{"/a#frag", "/a"},
		{"http://example.com/x/../y?q", "/x/../y"},
		{"http://example.com", "/"},
		{"*", "*"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := rawPath([]byte(tt.uri)); got != tt.want {
			t.Errorf("rawPath(%q): got %q, want %q", tt.uri, got, tt.want)
		}
	}
}

func TestServeDemoOrigin(t *testing.T) {
	t.Parallel()
	if err := ServeDemoOrigin(t.Context(), "127.0.0.1:-1", NewDemoOrigin()); err == nil {
		t.Errorf("ServeDemoOrigin on a bad address: got nil, want an error")
	}

	// Serve, then stop at once: a shutdown racing the start still returns.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ServeDemoOrigin(ctx, "127.0.0.1:0", NewDemoOrigin()) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeDemoOrigin after cancel: got %v, want nil", err)
	}
}

func TestDemoServerHeaders(t *testing.T) {
	t.Parallel()
	base := startDemo(t, NewDemoOrigin())
	resp, err := http.Get(base + "/api/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Server"); got != "" {
		t.Errorf("Server header: got %q, want none", got)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", got)
	}
}
