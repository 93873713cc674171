// Package hclattr reads the values of HCL attributes as the policy
// language writes them (docs/policy.md): lists of strings with each
// element's range, lists of HTTP statuses, strings, a word of a fixed
// vocabulary, a word for each of a block's names (on_conflict), prefix
// lengths, and durations that may be written in days;
// and it suggests the word a typo meant. Each function returns what it
// finds wrong as hcl.Diagnostics at the value's range (hcl
// guide/go_diagnostics.rst), in the order it finds them, and keeps no
// state: a feature records them with rules.Compiler.Append (the Compiler's
// StringList, IntList and PrefixLen, which rules' own attributes use too,
// record them themselves). It imports nothing of the edge
// (docs/architecture.md, "Packages"). Safe for concurrent use.
package hclattr
