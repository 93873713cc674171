// Package builtin is the list of features this build of edge has, in one
// place: cmd/edge passes it to rules.Load, and so do the tests and the load
// tool, so every caller reads a policy the same way. Nothing registers
// itself: a feature is in the build because it is in Features
// (docs/architecture.md, "Extension points").
package builtin

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/basic"
	"github.com/edge-gateway/edge/behaviour/adaptive"
	"github.com/edge-gateway/edge/behaviour/answer"
	"github.com/edge-gateway/edge/behaviour/ban"
	"github.com/edge-gateway/edge/behaviour/budgetlease"
	"github.com/edge-gateway/edge/behaviour/calendar"
	"github.com/edge-gateway/edge/behaviour/concurrency"
	"github.com/edge-gateway/edge/behaviour/cost"
	"github.com/edge-gateway/edge/behaviour/forgive"
	"github.com/edge-gateway/edge/behaviour/known"
	"github.com/edge-gateway/edge/behaviour/queue"
	"github.com/edge-gateway/edge/behaviour/refusal"
	"github.com/edge-gateway/edge/behaviour/shed"
	"github.com/edge-gateway/edge/behaviour/skip"
	"github.com/edge-gateway/edge/behaviour/values"
	"github.com/edge-gateway/edge/botscore"
	"github.com/edge-gateway/edge/fields"
	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/ja4"
	"github.com/edge-gateway/edge/login"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/otp"
	"github.com/edge-gateway/edge/rules"
)

// Features returns the features of this build, a new slice each call:
// what every request can be keyed and judged by (basic: ip, route,
// global, ip_in, ip_not_in), the node's own configuration (edge { } and store { }), request fields
// (header:, cookie:, query:, json:, form:), OTP (identity { }'s phone and
// otp_session, phone numbers, OTP challenges), login (identity { }'s
// account), visitors (visitor { }), bot scores (botscore { }, asn,
// country and the bot conditions), TLS fingerprints (ja4) and the test
// blocks `edge test` runs; and the behaviours of rule { } that live in
// folders of their own (behaviour/: answer: count = "failures" and
// reset_on_success, calendar, refusal, cost,
// budgetlease: budget_lease { }, queue, adaptive, skip, forgive: the
// exemptions a forgive grants, known: known { } blocks and known_visitors, ban, shed: load shedding, values:
// every value of an identity with several, concurrency: algorithm = "concurrency"). Every block of
// the policy language is now built. The order is the order of each rule's
// stages (Feature.RuleDone) and of the features' PolicyDone: ban comes
// after queue, so that its Judge sees what max_delay judged, and after
// known, so that a known caller's match is taken out of its rule before
// the rule's ban refuses; concurrency's RuleDone comes last, as its limit
// and lease are a concurrency rule's numbers, which the features before it
// see unset (a concurrency rule's stage itself is its first: its
// algorithm is compiled before any feature's attribute).
func Features() []rules.Feature {
	return []rules.Feature{basic.Feature(), node.Feature(), fields.Feature(), otp.Feature(), login.Feature(), nat.Feature(), botscore.Feature(), ja4.Feature(), answer.Feature(), calendar.Feature(), refusal.Feature(), cost.Feature(), budgetlease.Feature(), queue.Feature(), adaptive.Feature(), skip.Feature(), forgive.Feature(), known.Feature(), ban.Feature(), shed.Feature(), values.Feature(), concurrency.Feature(), tests()}
}

// Extensions returns the gateway extensions of this build (package
// gateway/ext), the HTTP halves of Features', in the order the gateway
// runs their hooks: ja4 (fingerprints of the TLS listener's connections,
// ja4_header, X-Edge-JA4), nat (visitor cookies verified and minted,
// X-Edge-Visitor), botscore (the score the origin and explain are told)
// and forgive (POST /admin/forgive carried out). New values each call: give each gateway.Server a list of its own
// (gateway.Options.Extensions), since an extension keeps state across the
// server's reloads (the visitor block's random secret).
func Extensions() []ext.Extension { return ExtensionsWith(ExtensionOptions{}) }

// ExtensionOptions configures the extensions ExtensionsWith returns.
type ExtensionOptions struct {
	// VisitorSecret signs visitor cookies when the visitor block's
	// secret_env is unset (nil: a random one, made once per list):
	// cmd/edge hands its random one to the process that replaces it on a
	// binary upgrade, so that the cookies it signed keep verifying
	// (nat.Extension).
	VisitorSecret []byte
}

// ExtensionsWith is Extensions configured by o.
func ExtensionsWith(o ExtensionOptions) []ext.Extension {
	return []ext.Extension{ja4.Extension(), nat.Extension(o.VisitorSecret), botscore.Extension(), forgive.Extension()}
}

// tests accepts test "NAME" { } blocks: `edge test` runs them and `edge
// validate` checks them (package policytest), while serving ignores them.
func tests() rules.Feature {
	return rules.Feature{
		Name:   "test",
		Blocks: []rules.BlockType{{Type: "test", Labels: []string{"name"}, Multiple: true, Decode: func(*rules.Compiler, *hcl.Block) any { return nil }}},
	}
}

// Load compiles a policy with Features (rules.Load).
func Load(filename string, src []byte) (*rules.Policy, hcl.Diagnostics) {
	return rules.Load(filename, src, Features()...)
}

// LoadFile reads and compiles the policy at path with Features
// (rules.LoadFile).
func LoadFile(path string) (*rules.Policy, hcl.Diagnostics) {
	return rules.LoadFile(path, Features()...)
}
