package ja4

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/edge-gateway/edge/rules"
)

// Tag is the ja4 characteristic's key tag (rules.CharacteristicType.Tag):
// 17, the first of the tags features outside rules take. Counters outlive
// releases: it never changes and no other characteristic takes it.
const Tag byte = 17

// Feature returns the ja4 characteristic (docs/policy.md): the request's
// JA4 fingerprint (rules.Request.JA4), as the edge computed it from the
// connection's ClientHello or a trusted proxy forwarded it in ja4_header.
//
//   - No fingerprint (plain HTTP, and no trusted proxy's header): Absent.
//     A rule keyed on ja4 then skips, whatever missing_identity and
//     sensitive say: the request could not have had one.
//   - A value that is not of JA4's shape (Valid), which only a trusted
//     proxy's header can give: Invalid, decided by the rule's
//     invalid_identity (reject, the default: a 400, so a proxy that
//     forwards garbage is seen at once rather than silently unlimited).
func Feature() rules.Feature {
	return rules.Feature{
		Name: "ja4",
		Characteristics: []rules.CharacteristicType{{
			Name: "ja4", Tag: Tag,
			Compile: func(*rules.Compiler, *rules.Rule, string, hcl.Range) rules.Characteristic { return char{} },
		}},
	}
}

// char is the compiled ja4 characteristic.
type char struct{}

// AppendValue appends the request's fingerprint. It allocates nothing.
func (char) AppendValue(buf []byte, req *rules.Request, _ *rules.Scratch) ([]byte, rules.Status) {
	switch {
	case len(req.JA4) == 0:
		return buf, rules.Absent
	case !Valid(req.JA4):
		return buf, rules.Invalid
	}
	return rules.AppendValue(buf, req.JA4), rules.Present
}

var _ rules.Characteristic = char{}
