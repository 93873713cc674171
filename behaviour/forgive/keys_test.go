package forgive_test

import (
	"context"
	"strings"
	"testing"

	"github.com/edge-gateway/edge/behaviour/forgive"
	"github.com/edge-gateway/edge/internal/rulestest"
	"github.com/edge-gateway/edge/rules"
)

// forgivePolicy keys one rule on each characteristic an operator can name.
const forgivePolicy = `
edge {
  nat64_prefixes = ["2001:db8:64::/96"]
}
identity {
  account      = ["json:username"]
  phone        = ["json:phone"]
  phone_region = "US"
}
rule "account-ip" {
  paths = ["/login"]
  key   = ["account", "ip"]
  limit = 5
  period = "15m"
}
rule "network" {
  paths       = ["/login"]
  key         = ["ip"]
  ipv4_prefix = 24
  ipv6_prefix = 48
  limit       = 50
  period      = "1m"
}
rule "phone" {
  paths = ["/login"]
  key   = ["phone", "phone_country"]
  limit = 3
  period = "1h"
}
rule "fields" {
  paths = ["/login"]
  key   = ["header:X-Api-Key", "query:client_id", "cookie:sid", "json:device"]
  limit = 3
  period = "1h"
}
rule "route-global" {
  paths = ["/login"]
  key   = ["route", "global"]
  limit = 1000
  period = "1m"
}
rule "visitor" {
  paths = ["/login"]
  key   = ["visitor"]
  limit = 10
  period = "1m"
}
visitor {}
`

// TestKeyFromTextIsTheRequestsKey: the key forgive computes from an
// operator's values has the bytes Check made for a real request carrying
// them, whatever spelling the operator uses (the account's case and white
// space, a national phone number, an IPv4 address embedded in a NAT64
// one, another address of the same /24).
func TestKeyFromTextIsTheRequestsKey(t *testing.T) {
	p := rulestest.Load(t, forgivePolicy)
	e := rulestest.NewEngine(t, nil)
	s := rules.NewScratch(8)
	r := rulestest.Req{Method: "POST", Path: "/Login", Client: "203.0.113.7", Fields: rulestest.Fields{
		HeaderValues: map[string]string{"X-Api-Key": "k-123"},
		QueryValues:  map[string]string{"client_id": "app"},
		CookieValues: map[string]string{"sid": "s1"},
		ContentType:  "application/json",
		Text:         `{"username":"Alice@Example.com","phone":"+1 415 555 2671","device":"d-9"}`,
	}}
	e.Check(context.Background(), rulestest.T0, p, r.Build(), s)
	got := map[string]rules.Key{}
	for _, m := range s.Matches {
		if m.Op >= 0 {
			got[m.Rule.Name] = s.Ops[m.Op].Key
		}
	}
	tests := []struct {
		rule   string
		values map[string]string
	}{
		{"account-ip", map[string]string{"account": "  ALICE@example.COM", "ip": "203.0.113.7"}},
		{"network", map[string]string{"ip": "2001:db8:64::203.0.113.99"}}, // same /24, embedded
		{"phone", map[string]string{"phone": "(415) 555-2671", "phone_country": "+14155552671"}},
		{"fields", map[string]string{"header:X-Api-Key": "k-123", "query:client_id": "app", "cookie:sid": "s1", "json:device": "d-9"}},
		{"route-global", map[string]string{"route": "/LOGIN"}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			want, ok := got[tt.rule]
			if !ok {
				t.Fatalf("the request made no op for %s", tt.rule)
			}
			k, err := forgive.KeyFromText(e, p, p.Rule(tt.rule), tt.values)
			if err != nil {
				t.Fatal(err)
			}
			if k != want {
				t.Errorf("got key %x, want the request's %x", k, want)
			}
		})
	}
}

func TestKeyFromTextRefusals(t *testing.T) {
	p := rulestest.Load(t, forgivePolicy)
	e := rulestest.NewEngine(t, nil)
	tests := []struct {
		rule   string
		values map[string]string
		want   string
	}{
		{"account-ip", map[string]string{"account": "alice@example.com"}, `missing "ip"`},
		{"account-ip", map[string]string{"account": "alice@example.com", "ip": "203.0.113.7", "phone": "x"}, `no "phone" in its key`},
		{"account-ip", map[string]string{"account": "alice@example.com", "ip": "not-an-ip"}, "ip: not an IP address"},
		{"account-ip", map[string]string{"account": " ", "ip": "203.0.113.7"}, "account:"},
		{"phone", map[string]string{"phone": "12", "phone_country": "+14155552671"}, "phone:"},
		{"fields", map[string]string{"header:X-Api-Key": "", "query:client_id": "a", "cookie:sid": "s", "json:device": "d"}, "empty value"},
		{"visitor", map[string]string{"visitor": "v1"}, "visitor: not a visitor: give its cookie's value"},
	}
	for _, tt := range tests {
		_, err := forgive.KeyFromText(e, p, p.Rule(tt.rule), tt.values)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %v: got error %v, want one containing %q", tt.rule, tt.values, err, tt.want)
		}
	}
}
