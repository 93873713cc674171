package login

import (
	"bytes"
	"testing"
	"unicode"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
)

// TestFoldMatchesCollation checks the accent folding against Unicode
// collation at primary strength (golang.org/x/text/collate, CLDR's root
// order, case, accents and width ignored), the equality MySQL 8's
// utf8mb4_0900_ai_ci and SQL Server's _CI_AI collations compare accounts
// by, for every letter of the Latin blocks (Latin-1 Supplement, Latin
// Extended-A and -B, Latin Extended Additional): the normal form is
// primary-equal to the letter (folding merges nothing the collation keeps
// apart), and a letter the collation treats as one or two ASCII letters
// ("é" as "e", "ø" as "o", "æ" as "ae") normalises to exactly them, so an
// origin's database and the edge agree on which spellings are one account.
func TestFoldMatchesCollation(t *testing.T) {
	c := collate.New(language.Und, collate.IgnoreCase, collate.IgnoreDiacritics, collate.IgnoreWidth)
	var buf collate.Buffer
	key := func(s string) string {
		buf.Reset()
		return string(c.KeyFromString(&buf, s))
	}
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
	checked := 0
	for _, block := range [][2]rune{{0xC0, 0x24F}, {0x1E00, 0x1EFF}} {
		for r := block[0]; r <= block[1]; r++ {
			if !unicode.IsLetter(r) {
				continue
			}
			raw := string(r)
			got, err := n.Normalize(nil, raw, false)
			if err != nil {
				t.Errorf("%U %s: %v", r, raw, err)
				continue
			}
			checked++
			if key(string(got)) != key(raw) {
				t.Errorf("%U %s normalises to %q, which the collation tells apart from it", r, raw, got)
			}
			if want, ok := ascii[key(raw)]; ok && !bytes.Equal(got, []byte(want)) {
				t.Errorf("%U %s normalises to %q; the collation reads it as %q", r, raw, got, want)
			}
		}
	}
	if checked < 650 {
		t.Errorf("checked %d letters, want the Latin blocks' 654", checked)
	}
}

// TestFoldIgnoresWhatCollationIgnores: the format characters of the Basic
// Multilingual Plane (Unicode category Cf: zero-width spaces and joiners,
// the soft hyphen, bidirectional marks) inside an account are ignored as
// the collation at primary strength ignores them, so "ali\u200bce" is no
// fresh account; a format character the collation counts would be kept.
func TestFoldIgnoresWhatCollationIgnores(t *testing.T) {
	c := collate.New(language.Und, collate.IgnoreCase, collate.IgnoreDiacritics, collate.IgnoreWidth)
	var buf collate.Buffer
	key := func(s string) string {
		buf.Reset()
		return string(c.KeyFromString(&buf, s))
	}
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
