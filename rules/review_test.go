package rules_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/basic"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// reviewSloppy is a feature characteristic written the easy wrong way: it
// returns its memo's bytes instead of appending them to the caller's
// buffer, dropping the tags and values of the key's characteristics before
// it (here the client's IP).
type reviewSloppy struct{ slot int }

var reviewXTenant = []byte("X-Tenant")

func (t reviewSloppy) AppendValue(buf []byte, req *rules.Request, s *rules.Scratch) ([]byte, rules.Status) {
	m := s.Memo(t.slot)
	if !m.Done {
		m.Done, m.Status = true, rules.Missing
		if v := req.Fields.Header(reviewXTenant); len(v) > 0 {
			m.Status, m.Value = rules.Present, rules.AppendValue(m.Value[:0], v)
		}
	}
	return m.Value, m.Status // not append(buf, m.Value...)
}

// reviewEmpty answers Present having appended nothing, for any request.
type reviewEmpty struct{}

func (reviewEmpty) AppendValue(buf []byte, _ *rules.Request, _ *rules.Scratch) ([]byte, rules.Status) {
	return buf, rules.Present
}

func reviewFeature() rules.Feature {
	return rules.Feature{Name: "review", Characteristics: []rules.CharacteristicType{
		{Name: "sloppy", Tag: 24, Compile: func(c *rules.Compiler, _ *rules.Rule, _ string, _ hcl.Range) rules.Characteristic {
			return reviewSloppy{slot: c.Slot("review.tenant")}
		}},
		{Name: "empty", Tag: 25, Compile: func(*rules.Compiler, *rules.Rule, string, hcl.Range) rules.Characteristic {
			return reviewEmpty{}
		}},
	}}
}

// TestReviewFeatureCannotDropKeyPrefix: a characteristic's AppendValue that
// returns a buffer not extending the one it was given would merge every
// client of a tenant into one counter (key = ["ip", "sloppy"]), and one
// that answers Present with nothing appended would make one key for every
// request. The engine refuses both: the first is Invalid (400 by the
// default invalid_identity), the second Missing (skipped by the default
// missing_identity); neither reaches the store.
func TestReviewFeatureCannotDropKeyPrefix(t *testing.T) {
	p, diags := rules.Load("review.hcl", []byte(`
rule "per-ip-tenant" {
  key    = ["ip", "sloppy"]
  limit  = 5
  period = "1m"
}
rule "per-ip-empty" {
  key    = ["ip", "empty"]
  limit  = 5
  period = "1m"
}
rule "empty-only" {
  key    = ["empty"]
  limit  = 5
  period = "1m"
}
rule "global" {
  key    = ["global"]
  limit  = 5
  period = "1m"
}
`), basic.Feature(), reviewFeature())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	e := rulestest.NewEngine(t, nil)
	want := map[string]rules.Outcome{
		"per-ip-tenant": rules.OutcomeInvalid,
		"per-ip-empty":  rules.OutcomeSkip,
		"empty-only":    rules.OutcomeSkip,
		"global":        rules.OutcomeAllow, // Shared: empty by design
	}
	for _, ip := range []string{"192.0.2.1", "198.51.100.7"} {
		s := rules.NewScratch(len(p.Rules))
		req := rules.Request{Method: []byte("GET"), Host: []byte("example.com"), Path: []byte("/"), Client: netip.MustParseAddr(ip),
			Fields: fields{HeaderValues: map[string]string{"X-Tenant": "acme"}}}
		d := e.Check(context.Background(), time.Unix(1e9, 0), p, &req, s)
		if d.Verdict != rules.RejectInvalid {
			t.Errorf("%s: verdict %d, want RejectInvalid (the sloppy characteristic)", ip, d.Verdict)
		}
		for _, m := range s.Matches {
			if m.Outcome != want[m.Rule.Name] {
				t.Errorf("%s: %s got %s, want %s", ip, m.Rule.Name, m.Outcome, want[m.Rule.Name])
			}
			if m.Rule.Name != "global" && m.Op >= 0 {
				t.Errorf("%s: %s reached the store with key %x", ip, m.Rule.Name, s.Ops[m.Op].Key)
			}
		}
	}
}

// TestReviewRuleBlockTypoSuggests: the pre-issue-10 compiler (ff6f3a1)
// suggested the rule's own block for a misspelled one ("whn { }": Did you
// mean "when"?) and for the block written as an attribute ("when = ...":
// Did you mean to define a block of type "when"?). Run the same file
// through `go run ./cmd/edge validate -config F` in /tmp/base10 to see both.
func TestReviewRuleBlockTypoSuggests(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`rule "v" {
  key    = ["ip"]
  limit  = 5
  period = "1h"
  whn {
  }
}`, `Did you mean "when"?`},
		{`rule "v" {
  key    = ["ip"]
  limit  = 5
  period = "1h"
  when   = 3
}`, `Did you mean to define a block of type "when"?`},
	} {
		_, diags := rules.Load("review.hcl", []byte(c.src), basic.Feature())
		if !diags.HasErrors() {
			t.Fatalf("loaded:\n%s", c.src)
		}
		found := false
		for _, d := range diags {
			if d.Severity == hcl.DiagError && strings.Contains(d.Detail, c.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %q among:\n%s", c.want, diags.Error())
		}
	}
}
