package builtin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/route"
	"github.com/edge-gateway/edge/rules"
	"github.com/edge-gateway/edge/rules/memstore"
)

// TestCounterKeysUnchanged decides a scripted run of requests against a
// policy that uses every characteristic, alone and together, and compares
// every op's counter key, every verdict and every rule's outcome with
// testdata/keys-golden.txt, which the engine before issue 10 (commit
// ff6f3a1, when rules knew each characteristic by name) wrote from the same
// files. Counters outlive releases: a key that changed would forget every
// counter of its rule at the upgrade, including ones still refusing
// (docs/architecture.md, "Extension points": tags never change). The
// deliberate changes since are otp_session's keys (issue 24: the challenge ID
// alone), whose lines testdata/README.md names, and one decision: a
// refused request's attempt makes no new key (issue 24, a tester's F1).
func TestCounterKeysUnchanged(t *testing.T) {
	p, diags := builtin.LoadFile("testdata/keys-policy.hcl")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	reqSrc, err := os.ReadFile("testdata/keys-requests.txt")
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := parseKeyRequests(string(reqSrc))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/keys-golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	st, err := memstore.New(memstore.Options{MaxKeys: 10000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Format 1: the golden was written before key formats, and a Redis
	// fleet that was running then stays on format 1 byte for byte until it
	// migrates (docs/deploying.md, "Key format and rolling upgrades").
	e, err := rules.NewEngine(rules.EngineOptions{Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"), KeyFormats: rules.KeyFormats{Format: rules.KeyFormat1}})
	if err != nil {
		t.Fatal(err)
	}
	s := rules.NewScratch(len(p.Rules))
	vc := nat.ConfigOf(p)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	for i, r := range reqs {
		req := rules.Request{Method: []byte(r.method), Host: []byte("example.com"), Path: route.AppendMatchPath(nil, []byte(r.path), true), Client: r.client, Fields: r.f}
		s.Begin(p)
		vc.SetVisitor(s, visitorID(r.visitor), r.visitor != "")
		d := e.Check(context.Background(), now, p, &req, s)
		dumpDecision(&b, i, d, s)
		now = now.Add(time.Second)
	}
	got, wantS := strings.Split(b.String(), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(got), len(wantS)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(wantS) {
			w = wantS[i]
		}
		if g != w {
			t.Fatalf("line %d differs from the pre-issue-10 engine's:\n got %q\nwant %q", i+1, g, w)
		}
	}
}

// keyFields is a map-backed rules.Fields.
type keyFields struct {
	headers  map[string]string
	rawQuery string
	ct, body string
}

func (f *keyFields) Header(n []byte) []byte {
	for k, v := range f.headers {
		if strings.EqualFold(k, string(n)) {
			return []byte(v)
		}
	}
	return nil
}
func (f *keyFields) Cookie(n []byte) []byte {
	for _, kv := range strings.Split(f.headers["Cookie"], "; ") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == string(n) {
			return []byte(v)
		}
	}
	return nil
}
func (f *keyFields) Query(n []byte) []byte {
	q, _ := url.ParseQuery(f.rawQuery)
	if v := q.Get(string(n)); v != "" {
		return []byte(v)
	}
	return nil
}
func (f *keyFields) RawQuery() []byte { return []byte(f.rawQuery) }
func (f *keyFields) Body() ([]byte, []byte) {
	return []byte(f.ct), []byte(f.body)
}
func (f *keyFields) Cookies() []byte {
	if c := f.headers["Cookie"]; c != "" {
		return []byte(c)
	}
	return nil
}

type keyReq struct {
	method, path, rawQuery string
	client                 netip.Addr
	visitor                string
	f                      *keyFields
}

func parseKeyRequests(src string) ([]keyReq, error) {
	var out []keyReq
	for _, line := range strings.Split(src, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		w := strings.Split(line, " | ")
		if len(w) != 7 {
			return nil, fmt.Errorf("line %q: want 7 fields", line)
		}
		r := keyReq{method: w[0], f: &keyFields{headers: map[string]string{}}}
		r.path, r.rawQuery, _ = strings.Cut(w[1], "?")
		r.f.rawQuery = r.rawQuery
		r.client = netip.MustParseAddr(w[2])
		if w[3] != "-" {
			r.visitor = w[3]
		}
		switch w[4] {
		case "json":
			r.f.ct = "application/json"
		case "form":
			r.f.ct = "application/x-www-form-urlencoded"
		}
		if w[5] != "-" {
			r.f.body = w[5]
		}
		if w[6] != "-" {
			for _, kv := range strings.Split(w[6], ";") {
				k, v, _ := strings.Cut(kv, "=")
				r.f.headers[k] = v
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func visitorID(name string) [16]byte {
	var id [16]byte
	sum := sha256.Sum256([]byte("visitor " + name))
	copy(id[:], sum[:])
	return id
}

// dumpDecision writes one request's decision: its verdict, every op's kind,
// key and result, every match's rule and outcome.
func dumpDecision(b *strings.Builder, i int, d rules.Decision, s *rules.Scratch) {
	fmt.Fprintf(b, "request %d: verdict %d\n", i+1, d.Verdict)
	for j, op := range s.Ops {
		fmt.Fprintf(b, "  op %d kind %d key %s allowed %v\n", j, op.Kind, hex.EncodeToString(op.Key[:]), j < len(s.Res) && s.Res[j].Allowed)
	}
	for _, m := range s.Matches {
		fmt.Fprintf(b, "  %s: %s\n", m.Rule.Name, m.Outcome)
	}
}
