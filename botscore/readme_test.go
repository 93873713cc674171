package botscore

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestREADMEReasonsAreTheCode: the README's reasons table is the weights
// table of score.go, name for name, weight for weight, meaning for
// meaning, in order: the documentation of the score cannot drift from it.
func TestREADMEReasonsAreTheCode(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, r := range AllReasons() {
		want.WriteString("| `" + r.Name() + "` | " + strconv.Itoa(r.Weight()) + " | " + r.Meaning() + " |\n")
	}
	if !strings.Contains(string(src), want.String()) {
		t.Errorf("README.md's reasons table is not score.go's; want these rows, in order:\n%s", want.String())
	}
}
