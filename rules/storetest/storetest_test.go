package storetest

import "testing"

// TestEveryAlgorithmHasCases holds the tables to counter's table: every
// algorithm in it runs in some case, and every policy algorithm has its
// expectation and its values table (uncovered), so that RunWith runs each
// on every store.
func TestEveryAlgorithmHasCases(t *testing.T) {
	t.Parallel()
	checkCovered(t, append(Cases(), SeedTraceCases(t)...))
}
