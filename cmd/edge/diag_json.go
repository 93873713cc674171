package main

import (
	"encoding/json"
	"io"

	"github.com/hashicorp/hcl/v2"
)

// jsonDiag is one diagnostic of `edge validate -json` (docs/policy.md):
// the file, the range of the offending text (absent when the diagnostic
// has no position, such as a file that cannot be read), "error" or
// "warning", and hcl's summary and detail.
type jsonDiag struct {
	File     string     `json:"file"`
	Range    *jsonRange `json:"range,omitempty"`
	Severity string     `json:"severity"`
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail"`
}

// jsonRange is an hcl.Range: Start inclusive, End exclusive.
type jsonRange struct {
	Start jsonPos `json:"start"`
	End   jsonPos `json:"end"`
}

// jsonPos is an hcl.Pos: Line and Column count from 1 (Column in
// characters, grapheme clusters as hcl counts them), Byte from 0.
type jsonPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// writeJSONDiags writes diags as one JSON array and a newline ([] when
// there are none); file names the diagnostics without a position.
func writeJSONDiags(w io.Writer, file string, diags hcl.Diagnostics) error {
	out := make([]jsonDiag, 0, len(diags))
	for _, d := range diags {
		j := jsonDiag{File: file, Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			j.Severity = "warning"
		}
		if s := d.Subject; s != nil {
			if s.Filename != "" {
				j.File = s.Filename
			}
			j.Range = &jsonRange{
				Start: jsonPos{Line: s.Start.Line, Column: s.Start.Column, Byte: s.Start.Byte},
				End:   jsonPos{Line: s.End.Line, Column: s.End.Column, Byte: s.End.Byte},
			}
		}
		out = append(out, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // details quote values as written: <, > and & stay so
	return enc.Encode(out)
}
