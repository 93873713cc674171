package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// fmtCmd is `edge fmt [-w] [-l] [FILE...]`: the canonical layout of policy
// files, hclwrite's (the layout `terraform fmt` writes: indentation, the
// alignment of = in a run of attributes, spacing). Without a FILE it
// formats policies.hcl. A file that does not parse is reported with its
// diagnostics and left alone, and the exit code is 1.
//
//   - no flag: print each file formatted, on stdout;
//   - -w: rewrite each file that is not formatted, in place;
//   - -l: list the files that are not formatted, one a line, and exit 1
//     when there is one (for CI); with -w, list those it rewrote and exit 0.
func fmtCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fmt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: edge fmt [-w] [-l] [FILE...]   (default FILE: policies.hcl)\n\n")
		fs.PrintDefaults()
	}
	write := fs.Bool("w", false, "rewrite the files in place instead of printing them")
	list := fs.Bool("l", false, "list the files whose formatting differs; exit 1 if any does (unless -w)")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	files := fs.Args()
	if len(files) == 0 {
		files = []string{"policies.hcl"}
	}
	code, differ := 0, false
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(stderr, "edge fmt:", err)
			code = 1
			continue
		}
		out, diags := formatHCL(f, src)
		if diags.HasErrors() {
			printDiags(stderr, f, diags)
			code = 1
			continue
		}
		changed := !bytes.Equal(src, out)
		switch {
		case *write:
			if changed {
				if err := writeInPlace(f, out); err != nil {
					fmt.Fprintln(stderr, "edge fmt:", err)
					code = 1
					continue
				}
			}
			if *list && changed {
				fmt.Fprintln(stdout, f)
			}
		case *list:
			if changed {
				fmt.Fprintln(stdout, f)
				differ = true
			}
		default:
			_, _ = stdout.Write(out)
		}
	}
	if differ && code == 0 {
		code = 1
	}
	return code
}

// formatHCL returns src in hclwrite's canonical layout. It parses src first:
// hclwrite.Format alone formats tokens, and would lay out a file that does
// not parse as if it did.
func formatHCL(filename string, src []byte) ([]byte, hcl.Diagnostics) {
	if _, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos); diags.HasErrors() {
		return nil, diags
	}
	return hclwrite.Format(src), nil
}

// writeInPlace replaces the file's contents with b, keeping its mode. It
// writes a temporary file beside it and renames it over, so a reader (the
// node's file watcher) sees the old file or the new one, never half of it.
func writeInPlace(path string, b []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".edge-fmt-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
