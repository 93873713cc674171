package demo

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
)

// startOrigin serves a fresh demo origin on a loopback port and returns its
// base URL. The server stops when the test ends.
func startOrigin(t *testing.T, o *Origin) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v, want nil after cancel", err)
		}
	})
	return "http://" + ln.Addr().String()
}

type response struct {
	status int
	body   string
}

// call sends one request with Go's client. A rawPath is put on the request
// line as is.
func call(t *testing.T, base, method, rawPath string, header http.Header, body io.Reader) response {
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
	return response{resp.StatusCode, string(b)}
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

func TestEndpoints(t *testing.T) {
	t.Parallel()
	base := startOrigin(t, New())

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

func TestHitsRecordRawPath(t *testing.T) {
	t.Parallel()
	o := New()
	base := startOrigin(t, o)

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
	if !maps.Equal(o.Hits(), want) {
		t.Errorf("Hits(): got %v, want %v", o.Hits(), want)
	}

	// Routing uses the normalised path: these are all logins.
	for _, p := range []string{"//login", "/%6Cogin", "/a/../login"} {
		h, b := formBody(url.Values{"password": {"letmein-demo"}})
		if r := call(t, base, "POST", p, h, b); r.status != 200 {
			t.Errorf("POST %s: got %d, want 200", p, r.status)
		}
	}
}

func TestLastAndReset(t *testing.T) {
	t.Parallel()
	base := startOrigin(t, New())

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
	var last Request
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

func TestHitsBounded(t *testing.T) {
	t.Parallel()
	o := New()
	o.maxHitPaths = 2
	base := startOrigin(t, o)

	for _, p := range []string{"/api/a", "/api/b", "/api/c", "/api/a"} {
		if r := call(t, base, "GET", p, nil, nil); r.status != 200 {
			t.Errorf("GET %s: got %d, want 200 even past the bound", p, r.status)
		}
	}
	want := map[string]int64{"/api/a": 2, "/api/b": 1}
	if got := o.Hits(); !maps.Equal(got, want) {
		t.Errorf("hits: got %v, want %v", got, want)
	}
}

func TestConcurrentHits(t *testing.T) {
	t.Parallel()
	o := New()
	base := startOrigin(t, o)

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
	if got := o.Hits(); !maps.Equal(got, want) {
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
