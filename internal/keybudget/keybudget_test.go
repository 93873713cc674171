package keybudget

import "testing"

// TestSplit: the rules without max_keys and the Shared budgets get an
// equal share of the store's max_keys, rounded up and at least 1; a Fixed
// budget keeps its size, a Following one takes its rule's, a Like one its
// other's.
func TestSplit(t *testing.T) {
	t.Parallel()
	var a, b, own int
	own = 7
	mint := Shared([8]byte{1}, "mint")
	fixed := Fixed([8]byte{2}, "fixed", 3)
	guilt := Following([8]byte{3}, "guilt", &own)
	prints := Like([8]byte{4}, "prints", mint)
	Split(10, []*int{&a, &b}, []*Budget{prints, mint, fixed, guilt})
	for _, tt := range []struct {
		name      string
		got, want int
	}{
		{"rule a", a, 4}, {"rule b", b, 4}, {"mint", mint.MaxKeys, 4}, {"fixed", fixed.MaxKeys, 3},
		{"guilt", guilt.MaxKeys, 7}, {"prints", prints.MaxKeys, 4},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %d keys, want %d", tt.name, tt.got, tt.want)
		}
	}
	Split(1, []*int{&a, &b}, nil)
	if a != 1 || b != 1 {
		t.Errorf("a store of one key: got %d and %d, want at least 1 each", a, b)
	}
}

// TestBound: only a budget under PerNetwork has a network bound, the
// store's share of it, and none without a share (a Redis store).
func TestBound(t *testing.T) {
	t.Parallel()
	known := Fixed([8]byte{1}, "known", 2000).PerNetwork()
	mint := Fixed([8]byte{2}, "mint", 2000)
	if !Bound([]*Budget{known, mint}, 50_000) || known.NetworkKeys() != 100 || mint.NetworkKeys() != 0 {
		t.Errorf("at 5%%: got %d and %d, want 100 and 0", known.NetworkKeys(), mint.NetworkKeys())
	}
	if Bound([]*Budget{known, mint}, 0) || known.NetworkKeys() != 0 {
		t.Errorf("without a share: got %d, want 0", known.NetworkKeys())
	}
}
