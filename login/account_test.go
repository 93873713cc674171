package login

import (
	"errors"
	"strings"
	"testing"
)

// TestNormalizeSpellingsShareOneAccount: every spelling an identity
// provider or a case-insensitive collation treats as one account gives one
// value.
func TestNormalizeSpellingsShareOneAccount(t *testing.T) {
	var n Normalizer
	for _, group := range [][]string{
		{"alice@example.com", "Alice@Example.com", " alice@example.com", "alice@example.com\t\n", "ALICE@EXAMPLE.COM",
			"\u00a0alice@example.com\u3000", // no-break and ideographic spaces
			"ａｌｉｃｅ@ｅｘａｍｐｌｅ.ｃｏｍ",             // full-width letters (NFKC)
			"alice\uff20example.com"},       // full-width commercial at
		{"strasse", "STRASSE", "Straße", "STRAẞE"}, // ß folds to ss (full case folding)
		{"ﬁnn", "finn", "FINN"},                    // the fi ligature (NFKC)
		{"café", "cafe\u0301", "CAFÉ"},             // composed and decomposed é
		{"ǅemal", "ǆemal", "Ǆemal"},                // title-case digraph
		{"σοφία", "ΣΟΦΊΑ", "σοφίας"[:len("σοφία")]},
	} {
		want, err := n.Normalize(nil, group[0], false)
		if err != nil {
			t.Fatalf("%q: %v", group[0], err)
		}
		for _, raw := range group[1:] {
			got, err := n.Normalize(nil, raw, false)
			if err != nil || string(got) != string(want) {
				t.Errorf("Normalize(%q) = %q, %v; want %q (as %q)", raw, got, err, want, group[0])
			}
		}
	}
}

// TestNormalizeKeepsAccountsApart: what an identity provider keeps apart
// stays apart.
func TestNormalizeKeepsAccountsApart(t *testing.T) {
	var n Normalizer
	seen := map[string]string{}
	for _, raw := range []string{"alice@example.com", "alice@example.org", "al ice@example.com", "alice", "j.doe@gmail.com", "jdoe@gmail.com", "jdoe+x@gmail.com", "bob"} {
		got, err := n.Normalize(nil, raw, false)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if prev, dup := seen[string(got)]; dup {
			t.Errorf("%q and %q normalise alike (%q); without account_aliases they must not", prev, raw, got)
		}
		seen[string(got)] = raw
	}
}

// TestNormalizeInvalid: empty once normalised, too long, not UTF-8 or with
// a control character: an invalid identity.
func TestNormalizeInvalid(t *testing.T) {
	var n Normalizer
	for _, raw := range []string{"", "   ", "\u3000\t", "\xff\xfe", "ali\x00ce", "ali\x07ce", "alice\u0085x", strings.Repeat("a", MaxAccountBytes+1)} {
		if got, err := n.Normalize(nil, raw, false); !errors.Is(err, ErrInvalidAccount) {
			t.Errorf("Normalize(%q) = %q, %v; want ErrInvalidAccount", raw, got, err)
		}
	}
	if _, err := n.Normalize(nil, strings.Repeat("a", MaxAccountBytes), false); err != nil {
		t.Errorf("an account of exactly MaxAccountBytes: %v", err)
	}
}

// TestAliases: the test vectors of account_aliases (docs/policy.md,
// "account_aliases").
func TestAliases(t *testing.T) {
	var n Normalizer
	for _, tt := range []struct{ raw, want string }{
		{"J.Doe+signup@Gmail.com", "jdoe@gmail.com"},
		{"jdoe@googlemail.com", "jdoe@gmail.com"},
		{"j.d.o.e@gmail.com", "jdoe@gmail.com"},
		{"jdoe+a+b@gmail.com", "jdoe@gmail.com"},
		{"alice+news@outlook.com", "alice@outlook.com"},
		{"alice+news@icloud.com", "alice@icloud.com"},
		{"a.lice+x@fastmail.com", "a.lice@fastmail.com"}, // dots count outside Gmail
		{"alice+x@example.com", "alice+x@example.com"},   // unknown providers: as written
		{"+tag@gmail.com", "+tag@gmail.com"},             // nothing would be left of the local part
		{"...@gmail.com", "...@gmail.com"},
		{"a@b@gmail.com", "a@b@gmail.com"},
		{"alice", "alice"},
		{"ｊｄｏｅ＋ｘ@ｇｍａｉｌ.ｃｏｍ", "jdoe@gmail.com"}, // after NFKC
	} {
		got, err := n.Normalize(nil, tt.raw, true)
		if err != nil || string(got) != tt.want {
			t.Errorf("Normalize(%q, aliases) = %q, %v; want %q", tt.raw, got, err, tt.want)
		}
	}
}

// TestNormalizeAllocatesNothingWarm: a warm Normalizer appends an ASCII
// account (the common case) into warm buffers without allocating, aliases
// or not. Non-ASCII goes through golang.org/x/text's collation, which
// allocates at a letter that may begin a contraction (BenchmarkNormalize).
func TestNormalizeAllocatesNothingWarm(t *testing.T) {
	var n Normalizer
	dst := make([]byte, 0, 256)
	for _, raw := range []string{" Alice@Example.com ", "J.Doe+x@Gmail.com", "bob"} {
		for _, aliases := range []bool{false, true} {
			dst, _ = n.Normalize(dst[:0], raw, aliases)
			if a := testing.AllocsPerRun(100, func() { dst, _ = n.Normalize(dst[:0], raw, aliases) }); a != 0 {
				t.Errorf("Normalize(%q, %v) allocates %.1f times warm", raw, aliases, a)
			}
		}
	}
}

func BenchmarkNormalize(b *testing.B) {
	for _, bb := range []struct{ name, raw string }{
		{"ascii", "Alice.Smith@Example.com"},
		{"fullwidth", "ａｌｉｃｅ@ｅｘａｍｐｌｅ.ｃｏｍ"},
		{"accented", "Alicé.Smith@Example.com"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			var n Normalizer
			dst := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = n.Normalize(dst[:0], bb.raw, false)
			}
		})
	}
}

// TestNormalizeFoldsAccents: the accent folding's test vectors
// (docs/policy.md, "The account's normal form"): what a case- and
// accent-insensitive collation (MySQL 8's utf8mb4_0900_ai_ci, SQL Server's
// _CI_AI) takes as one account is one value, and the normal form is a
// fixed point (normalising it again changes nothing).
func TestNormalizeFoldsAccents(t *testing.T) {
	var n Normalizer
	for _, tt := range []struct{ raw, want string }{
		{"alicé@example.com", "alice@example.com"},
		{"ÀLICE@example.com", "alice@example.com"},
		{"Alice\u0301@Example.com", "alice@example.com"}, // a combining acute accent
		{"ALİCE@EXAMPLE.COM", "alice@example.com"},       // İ folds to i + a combining dot
		{"ali\u200bce@example.com", "alice@example.com"}, // a zero-width space
		{"ali\u00adce@example.com", "alice@example.com"}, // a soft hyphen
		{"Bjørn", "bjorn"},
		{"ŁÓDŹ", "lodz"},
		{"Đorđe", "dorde"},
		{"Ærøskøbing", "aeroskobing"},
		{"Œuvre", "oeuvre"},
		{"Straße", "strasse"},
		{"Ŀlorenç", "llorenc"},
		{"Zoë", "zoe"},
		{"Ðaví", "davi"},
		{"がっこう", "かつこう"}, // the dakuten, and a small kana is its normal one
		{"Σοφία", "σοφια"},
		{"ǅemal", "dzemal"},
		{"ıstanbul", "ıstanbul"}, // the dotless i is a letter of its own
		{"þór", "þor"},           // so is thorn
		{"Йошкар", "йошкар"},     // and й, which the collation tells from и
		{"Ёлка", "елка"},         // but ё is е
		{"कुल", "कुल"},           // a Devanagari vowel sign is a letter's, kept
		// What NFKC, case folding and a table of letters missed (issue 24):
		{"ali\u20e3ce@example.com", "alice@example.com"},     // an enclosing keycap
		{"ali\u0345ce@example.com", "alice@example.com"},     // the ypogegrammeni (NFKC's ι)
		{"ali\U000e0100ce@example.com", "alice@example.com"}, // a supplementary variation selector
		{"ali\u180dce@example.com", "alice@example.com"},     // a Mongolian free variation selector
		{"ali\U000e0041ce@example.com", "alice@example.com"}, // a tag
		{"ali\u2066ce@example.com", "alice@example.com"},     // newer than the collation's data (Unicode 6.3)
		{"ali\u1ab0ce@example.com", "alice@example.com"},     // a mark newer than it (Unicode 7.0)
		{"a\U0001f15bice@example.com", "alice@example.com"},  // a negative squared L
		{"al\u0365ce@example.com", "alice@example.com"},      // a combining small i
		{"o\u0328\u0330\u20e3uvre", "ouvre"},                 // stacked marks
		{"カッコウ", "かつこう"},                                     // katakana
		{"ǤǥƷ", "ǥǥʒ"},                                       // letters of their own
	} {
		got, err := n.Normalize(nil, tt.raw, false)
		if err != nil || string(got) != tt.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tt.raw, got, err, tt.want)
			continue
		}
		if again, err := n.Normalize(nil, string(got), false); err != nil || string(again) != string(got) {
			t.Errorf("Normalize(%q) = %q, %v; want it unchanged, a fixed point", got, again, err)
		}
	}
}
