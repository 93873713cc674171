// Package hcldecode decodes HCL blocks so that one wrong value does not
// hide the block's other errors (docs/policy.md, "Diagnostics").
//
// gohcl.DecodeBody reports every attribute it cannot decode (a value of
// the wrong type, limit = "five"; an attribute or a nested block the
// schema lacks), but the block it leaves behind is unusable, so the
// compile of the block's other values, where their value errors (an
// unknown algorithm, a bad duration) are found, used to wait for the next
// run: one broken file took a round per kind of error (issue 25, §2.5).
// A Decoder instead decodes the block again without the items those
// errors point at, as if they were not written, and the caller compiles
// the rest; what that compile says only because of the items left out is
// dropped (Filter), so the one run reports every error it can without
// inventing any (hcl guide/go_diagnostics.rst: collect every diagnostic,
// return early only when continuing is unsafe).
//
// rules.Compiler holds one Decoder per Load (its Decode, DecodeInRule and
// DecodeRuleAttr are the doors features use). Beside it, InOrder lists a
// body's items in the order written (a rule's features' items, a when
// { }'s conditions) and Split splits a block several features share among
// them (identity { }). A Decoder is not safe for concurrent use; the
// package imports nothing of the edge but rules/hclattr.
package hcldecode
