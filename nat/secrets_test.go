package nat

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseSecrets(t *testing.T) {
	t.Parallel()
	const (
		a = "aaaaaaaaaaaaaaaa-first"
		b = "bbbbbbbbbbbbbbbb"
	)
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{"one", a, []string{a}, ""},
		{"two", a + "," + b, []string{a, b}, ""},
		{"spaces trimmed", "  " + a + " ,\t" + b + "\n", []string{a, b}, ""},
		{"inner spaces kept", "aaaa aaaa aaaa aaaa", []string{"aaaa aaaa aaaa aaaa"}, ""},
		{"exactly 16 bytes", "0123456789abcdef", []string{"0123456789abcdef"}, ""},
		{"eight", strings.Repeat(b+",", 7) + b, []string{b, b, b, b, b, b, b, b}, ""},
		{"empty", "", nil, "no visitor secrets"},
		{"blank", " \t ", nil, "no visitor secrets"},
		{"trailing comma", a + ",", nil, "visitor secret 2 of 2 is empty"},
		{"leading comma", "," + a, nil, "visitor secret 1 of 2 is empty"},
		{"double comma", a + ",," + b, nil, "visitor secret 2 of 3 is empty"},
		{"blank element", a + ",  ," + b, nil, "visitor secret 2 of 3 is empty"},
		{"only commas", ",", nil, "visitor secret 1 of 2 is empty"},
		{"short", "hunter2", nil, "visitor secret 1 of 1 is 7 bytes, at least 16 are needed"},
		{"short second", a + ",0123456789abcde", nil, "visitor secret 2 of 2 is 15 bytes"},
		{"short after trimming", "  hunter2-hunter2 ", nil, "is 15 bytes"},
		{"nine", strings.Repeat(b+",", 8) + b, nil, "9 visitor secrets, at most 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSecrets(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "hunter") || strings.Contains(err.Error(), "aaaa") || strings.Contains(err.Error(), "bbbb") {
					t.Errorf("error %q shows a secret", err)
				}
				if got != nil {
					t.Errorf("got %d secrets with an error, want none", len(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d secrets, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if string(got[i]) != tt.want[i] {
					t.Errorf("secret %d: got %q, want %q", i+1, got[i], tt.want[i])
				}
			}
			if _, err := NewSigner(Options{Secrets: got}); err != nil {
				t.Errorf("NewSigner refused ParseSecrets' output: %v", err)
			}
		})
	}
}

func TestRandomSecret(t *testing.T) {
	t.Parallel()
	a, b := RandomSecret(), RandomSecret()
	if len(a) != 32 || len(b) != 32 {
		t.Fatalf("got %d and %d bytes, want 32", len(a), len(b))
	}
	if bytes.Equal(a, b) {
		t.Errorf("got two equal random secrets")
	}
	s := signer(t, a)
	v, id := mint(s, t0)
	if got, ok := s.Verify([]byte(v), t0); !ok || got != id {
		t.Errorf("got %x, %v; want %x, true", got, ok, id)
	}
	// A node that restarts with a new random secret refuses the old cookies:
	// the reason a fleet needs a shared one.
	if _, ok := signer(t, b).Verify([]byte(v), t0); ok {
		t.Errorf("another random secret: got accepted, want refused")
	}
}
