// Package builtin is the list of features this build of edge has, in one
// place: cmd/edge passes it to rules.Load, and so do the tests and the load
// tool, so every caller reads a policy the same way. Nothing registers
// itself: a feature is in the build because it is in Features
// (docs/architecture.md, "Extension points").
package builtin

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/fields"
	"github.com/edge-gateway/edge/login"
	"github.com/edge-gateway/edge/nat"
	"github.com/edge-gateway/edge/otp"
	"github.com/edge-gateway/edge/rules"
)

// Features returns the features of this build, a new slice each call:
// request fields (header:, cookie:, query:, json:, form:), OTP (identity
// { }'s phone and otp_session, phone numbers, OTP challenges), login
// (identity { }'s account), visitors (visitor { }), the test
// blocks `edge test` runs, and the names of the features still to come,
// which a policy may not use yet.
func Features() []rules.Feature {
	return []rules.Feature{fields.Feature(), otp.Feature(), login.Feature(), nat.Feature(), tests(), planned()}
}

// tests accepts test "NAME" { } blocks: `edge test` runs them and `edge
// validate` checks them (package policytest), while serving ignores them.
func tests() rules.Feature {
	return rules.Feature{
		Name:   "test",
		Blocks: []rules.BlockType{{Type: "test", Labels: []string{"name"}, Multiple: true, Decode: func(*rules.Compiler, *hcl.Block) any { return nil }}},
	}
}

// planned names what the policy language has but this build does not yet:
// a policy that uses it is refused by name ("Not supported yet") rather than
// loaded with a rule that could never count.
func planned() rules.Feature {
	char := func(name string, tag byte) rules.CharacteristicType {
		return rules.CharacteristicType{Name: name, Tag: tag, Hidden: true,
			Compile: func(c *rules.Compiler, _ *rules.Rule, _ string, rng hcl.Range) rules.Characteristic {
				c.Errorf(rng, "Not supported yet", "characteristic %q is not available in this build", name)
				return nil
			}}
	}
	cond := func(name string) rules.ConditionType {
		return rules.ConditionType{Name: name, Hidden: true,
			Compile: func(c *rules.Compiler, _ *rules.Rule, a *hcl.Attribute) rules.Condition {
				c.Errorf(a.NameRange, "Not supported yet", "the %s condition is not available in this build", name)
				return nil
			}}
	}
	return rules.Feature{
		Name: "planned",
		Blocks: []rules.BlockType{{Type: "botscore", Decode: func(c *rules.Compiler, b *hcl.Block) any {
			c.Errorf(b.DefRange, "Not supported yet", "the botscore block is not available in this build")
			return nil
		}}},
		Characteristics: []rules.CharacteristicType{
			char("asn", rules.TagASN), char("country", rules.TagCountry),
		},
		Conditions: []rules.ConditionType{
			cond("bot_score_below"), cond("hosting"), cond("asn_in"), cond("country_in"), cond("country_not_in"),
		},
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
