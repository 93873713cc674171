package differential

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/edge-gateway/edge/builtin"
	"github.com/edge-gateway/edge/gateway"
	"github.com/edge-gateway/edge/login"
	"github.com/edge-gateway/edge/otp"
	"github.com/edge-gateway/edge/rules/memstore"
)

var (
	fuzzN      = flag.Int("differential.fuzz", 30, "fuzzed requests per variant (a long run: thousands)")
	fuzzSeed   = flag.Uint64("differential.seed", 1, "seed of the fuzzed requests")
	reportPath = flag.String("differential.report", "", "write the disagreements, grouped by class, as Markdown to this file")
)

// TestDifferential sends the corpus and the fuzzed requests through the
// real edge to each stack's every variant and fails on any disagreement:
// a value an idiom read that the edge did not count (docs/differential.md).
func TestDifferential(t *testing.T) {
	cases := corpus()
	cases = append(cases, fuzzCases(cases, *fuzzN, *fuzzSeed)...)
	var mu sync.Mutex
	var results []*stackRun
	t.Cleanup(func() {
		if *reportPath == "" {
			return
		}
		sort.Slice(results, func(i, j int) bool { return results[i].stack < results[j].stack })
		if err := os.WriteFile(*reportPath, []byte(findingsReport(results, len(cases), *fuzzN, *fuzzSeed)), 0o644); err != nil {
			t.Error(err)
		}
	})
	for _, st := range stacks {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			origin := st.start(t)
			run := &stackRun{stack: st.name, origin: origin, edge: startEdge(t, origin), confirmed: map[string]int{}}
			for _, variant := range st.variants {
				for _, c := range cases {
					run.send(t, variant, c)
				}
			}
			mu.Lock()
			results = append(results, run)
			mu.Unlock()
			run.finish(t, st.variants)
		})
	}
}

// stackRun is one stack's run: its edge and what it found.
type stackRun struct {
	stack  string
	edge   string // the edge's address
	origin string // the origin's address
	src    valueSource
	n      int // sends so far (the nonce)

	requests, refused, originRefused, forwarded, probes int
	confirmed                                           map[string]int // per variant: values read and proved counted
	found                                               []disagreement
}

// disagreement is a value a variant read that the edge did not count.
type disagreement struct {
	Stack, Variant, Case, Class string
	Field                       string
	Value                       []byte   // what the variant read
	Verdict                     string   // verdictUncounted or verdictInvalid
	Probes                      []string // each probe and the edge's answer
	Request                     []byte   // the corpus request, raw
	OriginCT                    string   // the Content-Type the origin saw
	Read                        map[string][]string
}

const (
	// verdictUncounted: every probe of the value reached the origin.
	verdictUncounted = "not counted"
	// verdictInvalid: the edge refuses the value itself as an invalid
	// identity (400), so it counted some other reading of the request.
	verdictInvalid = "refused as an invalid identity when sent alone"
)

// finish prints the stack's line, fails on disagreements, and checks that
// every variant was really tested: a variant that never read a value the
// edge counted (an origin that reads nothing, a wrong route) would agree
// with everything.
func (run *stackRun) finish(t *testing.T, variants []string) {
	fmt.Printf("differential: %s requests=%d disagreements=%d\n", run.stack, run.requests, len(run.found))
	t.Logf("%s: %d requests: %d refused (by the edge, or by the origin's server with a 4xx), %d not answered by the app, %d read by the app; %d probes",
		run.stack, run.requests, run.refused, run.originRefused, run.forwarded, run.probes)
	for _, v := range variants {
		if run.confirmed[v] == 0 {
			t.Errorf("%s: no value it read was ever proved counted: the harness does not test this variant", v)
		}
	}
	for _, d := range run.found {
		t.Errorf("%s %s: %s: read %s %s, %s\n\tprobes: %s\n\torigin saw Content-Type %s; read %s\n\trequest: %s",
			d.Variant, d.Case, d.Class, d.Field, strconv.Quote(string(d.Value)), d.Verdict,
			strings.Join(d.Probes, "; "), strconv.Quote(d.OriginCT), formatRead(d.Read), quoteRequest(d.Request))
	}
}

// send sends case c to variant through the edge with fresh values, and
// when the edge forwarded it, probes every value the variant read.
func (run *stackRun) send(t *testing.T, variant string, c corpusCase) {
	t.Helper()
	v := run.src.next(t)
	run.n++
	nonce := run.stack + "-" + strconv.Itoa(run.n)
	raw := rawRequest(c.Build(v), "/v/"+variant, nonce)
	run.requests++
	rep, err := exchange(run.edge, raw)
	if err != nil {
		t.Fatalf("%s %s: %v\n\trequest: %s", variant, c.Name, err, quoteRequest(raw))
	}
	marker := rep.Header.Get(variantHeader)
	if marker == "" {
		switch {
		case rep.Status == http.StatusNotFound:
			t.Fatalf("%s %s: 404: no such route on the origin\n\trequest: %s", variant, c.Name, quoteRequest(raw))
		case rep.Status == http.StatusBadGateway || rep.Status == http.StatusGatewayTimeout || rep.Status < 400:
			// The edge forwarded it and the origin's server answered
			// without running the app (Flask's automatic OPTIONS) or
			// dropped the connection (PHP's server on a method it cannot
			// parse): no idiom read anything, if the origin is still
			// alive. One that died may have read it first.
			if !run.alive() {
				t.Fatalf("%s %s: answer %d and the origin is down\n\trequest: %s\n\tanswer: %q", variant, c.Name, rep.Status, quoteRequest(raw), rep.Body)
			}
			run.originRefused++
		default:
			// Refused, by the edge (400, 413, 429, …) or by the origin's
			// server before the app ran: no idiom read anything.
			run.refused++
		}
		if c.MustForward {
			t.Errorf("%s %s: answer %d: the edge refused a plain request, and an edge that refuses everything agrees with every origin\n\trequest: %s\n\tanswer: %q",
				variant, c.Name, rep.Status, quoteRequest(raw), rep.Body)
		}
		return
	}
	if marker != variant {
		t.Fatalf("%s %s: answered by variant %q", variant, c.Name, marker)
	}
	var e echo
	if err := json.Unmarshal(rep.Body, &e); err != nil {
		t.Fatalf("%s %s: echo %q: %v", variant, c.Name, rep.Body, err)
	}
	run.forwarded++
	read := map[string][][]byte{}
	for _, f := range fields {
		for _, h := range e.Fields[f].Values {
			b, err := hex.DecodeString(h)
			if err != nil {
				t.Fatalf("%s %s: echo of %s: %v", variant, c.Name, f, err)
			}
			if len(b) > 0 {
				read[f] = append(read[f], b)
			}
		}
	}
	ct, _ := hex.DecodeString(e.CT)
	report := func(field string, value []byte, verdict string, probes []string) {
		run.found = append(run.found, disagreement{
			Stack: run.stack, Variant: variant, Case: c.Name, Class: c.Class,
			Field: field, Value: value, Verdict: verdict, Probes: probes,
			Request: raw, OriginCT: string(ct), Read: readStrings(read),
		})
	}
	p := prober{t: t, run: run, nonce: nonce}

	// The phone: one identity across json:, form: and query: (one
	// counter), normalised to E.164, so spellings of one number are one
	// probe.
	seen := map[string]bool{}
	for _, ph := range read["phone"] {
		k := string(ph)
		if n, err := otp.Normalize(k, "US"); err == nil {
			k = n.E164
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		if ok, verdict, probes := p.phone(ph); ok {
			run.confirmed[variant]++
		} else {
			report("phone", ph, verdict, probes)
		}
	}
	for _, f := range []struct{ field, prefix string }{{"username", "username"}, {"email", "email"}, {"challenge_id", "challenge"}} {
		seen := map[string]bool{}
		for _, val := range read[f.field] {
			if seen[string(val)] {
				continue
			}
			seen[string(val)] = true
			if ok, verdict, probes := p.field(f.field, f.prefix, val); ok {
				run.confirmed[variant]++
			} else {
				report(f.field, val, verdict, probes)
			}
		}
	}
	// The account: every username and every email read is an account the
	// login rules count (a request naming two counts both), or the edge
	// refused the request (400); every email read is the email the signup
	// rules count. One identity across json:, form: and query: (one
	// counter), normalised as the edge normalises it, so spellings of one
	// account are one probe.
	for _, id := range []struct {
		rule, field string
		from        []string
	}{{"account", "username", []string{"username", "email"}}, {"email", "email", []string{"email"}}} {
		seen = map[string]bool{}
		var norm login.Normalizer
		for _, f := range id.from {
			for _, val := range read[f] {
				k := string(val)
				if a, err := norm.Normalize(nil, k, false); err == nil {
					k = string(a)
				}
				if seen[k] {
					continue
				}
				seen[k] = true
				if ok, verdict, probes := p.identity(id.rule, id.field, val); ok {
					run.confirmed[variant]++
				} else {
					report(id.rule, val, verdict, probes)
				}
			}
		}
	}
	// The OTP session: every challenge id read, what the verify rules key
	// on (the challenge id alone, whatever phone is written beside it).
	seen = map[string]bool{}
	for _, ch := range read["challenge_id"] {
		if seen[string(ch)] {
			continue
		}
		seen[string(ch)] = true
		if ok, verdict, probes := p.session(ch); ok {
			run.confirmed[variant]++
		} else {
			report("otp_session", ch, verdict, probes)
		}
	}
}

// alive reports whether the origin answers its health check.
func (run *stackRun) alive() bool {
	c := &http.Client{Timeout: ioTimeout}
	resp, err := c.Get("http://" + run.origin + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// prober sends a send's probes: requests that name one value in one
// unambiguous place, on a route only one rule matches (/probe/RULE).
type prober struct {
	t     *testing.T
	run   *stackRun
	nonce string
}

type probeOutcome uint8

const (
	probeCounted   probeOutcome = iota // 429: the rule's counter for the value is spent
	probeForwarded                     // the origin answered: the counter was not spent
	probeInvalid                       // 400: the edge will not key on the value at all
)

// probe sends r to /probe/RULE and classifies the answer.
func (p prober) probe(rule string, r request) (probeOutcome, string) {
	p.t.Helper()
	raw := rawRequest(r, "/probe/"+rule, p.nonce)
	p.run.probes++
	rep, err := exchange(p.run.edge, raw)
	if err != nil {
		p.t.Fatalf("probe %s: %v", rule, err)
	}
	desc := fmt.Sprintf("/probe/%s %s → %d", rule, probeText(r), rep.Status)
	switch {
	case rep.Status == http.StatusTooManyRequests:
		return probeCounted, desc
	case rep.Header.Get(variantHeader) == "probe":
		return probeForwarded, desc + " (origin)"
	case rep.Status == http.StatusBadRequest:
		return probeInvalid, desc
	}
	p.t.Fatalf("probe %s: unexpected answer %d %q\n\trequest: %s", rule, rep.Status, rep.Body, quoteRequest(raw))
	return 0, ""
}

func probeText(r request) string {
	if r.Query != "" {
		return "?" + r.Query
	}
	return string(r.Body)
}

func jsonProbe(m map[string]string) request {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		panic(err) // strings always encode
	}
	return typed(jsonType, strings.TrimSuffix(b.String(), "\n"))
}

// verdict turns a value's probe outcomes into (counted, verdict).
func verdict(outs []probeOutcome) (bool, string) {
	invalid := false
	for _, o := range outs {
		switch o {
		case probeCounted:
			return true, ""
		case probeInvalid:
			invalid = true
		}
	}
	if invalid {
		return false, verdictInvalid
	}
	return false, verdictUncounted
}

// phone probes the phone rule with {"phone":V}. A value that is not UTF-8
// has no JSON spelling, and the edge reads none from a form or a query
// either: it cannot have been counted.
func (p prober) phone(v []byte) (bool, string, []string) {
	if !utf8.Valid(v) {
		return false, verdictInvalid, []string{"none: not UTF-8, the edge counts no such phone"}
	}
	o, desc := p.probe("phone", jsonProbe(map[string]string{"phone": string(v)}))
	ok, why := verdict([]probeOutcome{o})
	return ok, why, []string{desc}
}

// field probes the username or challenge id rules, one per place the
// policy keys it (json:, form:, query:): counted when any of them
// refuses. Each probe spends only its own rule's counter.
func (p prober) field(name, rulePrefix string, v []byte) (bool, string, []string) {
	var outs []probeOutcome
	var descs []string
	if utf8.Valid(v) {
		o, d := p.probe(rulePrefix+"-json", jsonProbe(map[string]string{name: string(v)}))
		outs, descs = append(outs, o), append(descs, d)
		if o == probeCounted {
			return true, "", descs
		}
		o, d = p.probe(rulePrefix+"-form", typed(formType, name+"="+q(string(v))))
		outs, descs = append(outs, o), append(descs, d)
		if o == probeCounted {
			return true, "", descs
		}
	}
	o, d := p.probe(rulePrefix+"-query", request{Query: name + "=" + q(string(v))})
	outs, descs = append(outs, o), append(descs, d)
	ok, why := verdict(outs)
	return ok, why, descs
}

// identity probes the rule of an identity read from json:, form: and
// query: (account, email, otp_session) with {"FIELD":V}, or with the query
// when V is not UTF-8 (no JSON spelling; the edge reads the identity from
// the query as it reads the phone).
func (p prober) identity(rule, field string, v []byte) (bool, string, []string) {
	r := jsonProbe(map[string]string{field: string(v)})
	if !utf8.Valid(v) {
		r = request{Query: field + "=" + q(string(v))}
	}
	o, d := p.probe(rule, r)
	ok, why := verdict([]probeOutcome{o})
	return ok, why, []string{d}
}

// session probes the otp_session rule with {"challenge_id":C}.
func (p prober) session(ch []byte) (bool, string, []string) {
	return p.identity("session", "challenge_id", ch)
}

func readStrings(read map[string][][]byte) map[string][]string {
	out := map[string][]string{}
	for f, vs := range read {
		for _, v := range vs {
			out[f] = append(out[f], string(v))
		}
	}
	return out
}

func formatRead(read map[string][]string) string {
	var parts []string
	for _, f := range fields {
		if vs := read[f]; len(vs) > 0 {
			q := make([]string, len(vs))
			for i, v := range vs {
				q[i] = strconv.Quote(v)
			}
			parts = append(parts, f+"="+strings.Join(q, ","))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " ")
}

// fixedClock is the edge's and the store's time: frozen, so no counter
// decays during a run.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// startEdge starts the real edge in process on loopback with the
// harness's policy, in front of the origin at upstream (HOST:PORT), and
// returns its address.
func startEdge(t *testing.T, upstream string) string {
	t.Helper()
	const path = "testdata/policy.hcl"
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, diags := builtin.Load(path, src)
	if diags.HasErrors() {
		t.Fatalf("loading %s: %s", path, diags.Error())
	}
	clk := fixedClock{time.Unix(1_800_000_000, 0)}
	st, err := memstore.New(memstore.Options{MaxKeys: 1_000_000, SweepInterval: -1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(gateway.Options{
		Policy: p, Extensions: builtin.Extensions(),
		Store:     st,
		Upstream:  "http://" + upstream,
		KeySecret: []byte("differential-harness-key-secret-0123456789"),
		Clock:     clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	return ln.Addr().String()
}
