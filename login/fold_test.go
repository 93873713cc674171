package login

import (
	"bytes"
	"slices"
	"testing"
	"unicode"
)

// TestFoldMatchesCollation checks the accent folding against Unicode
// collation at primary strength (primary), the equality MySQL 8's
// utf8mb4_0900_ai_ci and SQL Server's _CI_AI collations compare accounts
// by. Over every letter and combining mark of the Basic Multilingual
// Plane, the normal form is primary-equal to what was written (folding
// merges nothing the collation keeps apart: й stays apart from и, a
// Devanagari vowel sign stays: of the accent folding alone, the case
// folding's being an identity provider's); and every letter of the Latin blocks
// (Latin-1 Supplement, Latin Extended-A and -B, Latin Extended Additional)
// that the collation treats as one or two ASCII letters ("é" as "e", "ø"
// as "o", "æ" as "ae") normalises to exactly them, so an origin's
// database and the edge agree on which spellings are one account.
func TestFoldMatchesCollation(t *testing.T) {
	key := primary()
	ascii := map[string]string{} // primary key → the ASCII letters it is
	for a := 'a'; a <= 'z'; a++ {
		ascii[key(string(a))] = string(a)
		for b := 'a'; b <= 'z'; b++ {
			if _, dup := ascii[key(string(a)+string(b))]; !dup {
				ascii[key(string(a)+string(b))] = string(a) + string(b)
			}
		}
	}
	var n Normalizer
	checked, latin := 0, 0
	for r := rune(0x80); r <= 0xFFFF; r++ {
		raw := string(r)
		switch {
		case unicode.Is(unicode.Mn, r):
			raw = "a" + raw + "b"
		case !unicode.IsLetter(r):
			continue
		}
		got, err := n.Normalize(nil, raw, false)
		if err != nil {
			continue // a letter NFKC makes a control or space of
		}
		checked++
		// The normal form's key is what was written's, except where the
		// collation's data is older than the letter (appendNewer).
		if k := key(raw); k != key(string(got)) && !slices.ContainsFunc(weights(k), func(w int) bool { return w >= implicitOther }) {
			t.Errorf("%U %s normalises to %q, which the collation tells apart from it", r, raw, got)
		}
		if r > 0x24F && (r < 0x1E00 || r > 0x1EFF) || unicode.Is(unicode.Mn, r) {
			continue
		}
		latin++
		if want, ok := ascii[key(raw)]; ok && !bytes.Equal(got, []byte(want)) {
			t.Errorf("%U %s normalises to %q; the collation reads it as %q", r, raw, got, want)
		}
	}
	if checked < 40000 || latin < 650 {
		t.Errorf("checked %d letters and marks, %d of the Latin blocks; want the BMP's (over 40000) and the Latin blocks' 654", checked, latin)
	}
}

// TestFoldIgnoresWhatCollationIgnores: the format characters of the Basic
// Multilingual Plane (Unicode category Cf: zero-width spaces and joiners,
// the soft hyphen, bidirectional marks) inside an account are ignored as
// the collation at primary strength ignores them, so "ali\u200bce" is no
// fresh account; a format character the collation counts would be kept.
func TestFoldIgnoresWhatCollationIgnores(t *testing.T) {
	key := primary()
	newer := map[rune]bool{0x0605: true, 0x061C: true, 0x0890: true, 0x0891: true, 0x08E2: true, 0x180E: true, 0x2066: true, 0x2067: true, 0x2068: true, 0x2069: true}
	var n Normalizer
	plain, _ := n.Normalize(nil, "alice", false)
	checked := 0
	for r := rune(0x80); r <= 0xFFFF; r++ {
		if !unicode.Is(unicode.Cf, r) {
			continue
		}
		raw := "ali" + string(r) + "ce"
		got, err := n.Normalize(nil, raw, false)
		if err != nil {
			t.Errorf("%U: %v", r, err)
			continue
		}
		checked++
		ignored := key(raw) == key("alice")
		if newer[r] {
			// Format characters younger than x/text's collation data,
			// which weighs them as unknown characters; Unicode's own
			// collation table (DUCET) ignores every format character.
			ignored = true
		}
		if ignored != bytes.Equal(got, plain) {
			t.Errorf("%U: %q normalises to %q; the collation ignores it: %v", r, raw, got, ignored)
		}
	}
	if checked < 40 {
		t.Errorf("checked %d format characters, want the BMP's (over 40)", checked)
	}
}
