// Package builtin is the list of features this build of edge has, in one
// place: cmd/edge passes it to rules.Load, and so do the tests and the load
// tool, so every caller reads a policy the same way. Nothing registers
// itself: a feature is in the build because it is in Features
// (docs/architecture.md, "Extension points").
package builtin

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/behaviour/ban"
	"github.com/edge-gateway/edge/behaviour/calendar"
	"github.com/edge-gateway/edge/behaviour/queue"
	"github.com/edge-gateway/edge/behaviour/refusal"
	"github.com/edge-gateway/edge/behaviour/shed"
	"github.com/edge-gateway/edge/botscore"
	"github.com/edge-gateway/edge/fields"
	"github.com/edge-gateway/edge/ja4"
	"github.com/edge-gateway/edge/login"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/node"
	"github.com/edge-gateway/edge/otp"
	"github.com/edge-gateway/edge/rules"
)

// Features returns the features of this build, a new slice each call:
// the node's own configuration (edge { } and store { }), request fields (header:, cookie:, query:, json:, form:), OTP (identity
// { }'s phone and otp_session, phone numbers, OTP challenges), login
// (identity { }'s account), visitors (visitor { }), bot scores (botscore
// { }, asn, country and the bot conditions), TLS fingerprints (ja4) and
// the test blocks `edge test` runs; and the behaviours of rule { } that
// live in folders of their own (behaviour/: calendar, refusal, queue,
// ban, shed). Every block of the policy language is now built.
func Features() []rules.Feature {
	return []rules.Feature{node.Feature(), fields.Feature(), otp.Feature(), login.Feature(), nat.Feature(), botscore.Feature(), ja4.Feature(), calendar.Feature(), refusal.Feature(), queue.Feature(), ban.Feature(), shed.Feature(), tests()}
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
