package otp

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"
)

// repoRoot walks up from the package directory to the directory holding
// go.mod.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("getting the working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}

// csvRow is one record of a test table, read by column name.
type csvRow struct {
	line   int // 1-based line of the record in the file (header = 1)
	fields map[string]string
}

func (r csvRow) get(tb testing.TB, col string) string {
	tb.Helper()
	v, ok := r.fields[col]
	if !ok {
		tb.Fatalf("line %d: no column %q", r.line, col)
	}
	return v
}

// readTable reads testdata/data/phones/NAME at the repository root and
// checks that its header holds the columns the tests read.
func readTable(tb testing.TB, name string, want ...string) []csvRow {
	tb.Helper()
	path := filepath.Join(repoRoot(tb), "testdata", "data", "phones", name)
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("opening %s: %v", name, err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		tb.Fatalf("reading %s: %v", name, err)
	}
	if len(recs) < 2 {
		tb.Fatalf("%s has no rows", name)
	}
	header := recs[0]
	idx := make(map[string]int, len(header))
	for i, h := range header {
		idx[h] = i
	}
	for _, col := range want {
		if _, ok := idx[col]; !ok {
			tb.Fatalf("%s: header %v has no column %q", name, header, col)
		}
	}
	rows := make([]csvRow, 0, len(recs)-1)
	for n, rec := range recs[1:] {
		fields := make(map[string]string, len(header))
		for i, h := range header {
			fields[h] = rec[i]
		}
		rows = append(rows, csvRow{line: n + 2, fields: fields})
	}
	return rows
}
