package fields

import (
	"errors"
	"testing"
)

func TestFormField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		body      string
		field     string
		want      string
		wantFound bool
		wantErr   error
	}{
		{name: "single", body: "phone=2025550100", field: "phone", want: "2025550100", wantFound: true},
		{name: "among others", body: "a=1&phone=2025550100&b=2", field: "phone", want: "2025550100", wantFound: true},
		{name: "plus is a space", body: "phone=%2B1+202+555+0100", field: "phone", want: "+1 202 555 0100", wantFound: true},
		{name: "percent escapes", body: "phone=%28202%29%20555-0100", field: "phone", want: "(202) 555-0100", wantFound: true},
		{name: "lower-case hex", body: "phone=%2b%2B1", field: "phone", want: "++1", wantFound: true},
		{name: "UTF-8 digits", body: "phone=%D9%A2%D9%A0", field: "phone", want: "٢٠", wantFound: true},
		{name: "encoded name", body: "ph%6Fne=1", field: "phone", want: "1", wantFound: true},
		{name: "empty value", body: "phone=", field: "phone", want: "", wantFound: true},
		{name: "no equals sign", body: "phone&a=1", field: "phone", want: "", wantFound: true},
		{name: "equals sign in the value", body: "phone=a=b", field: "phone", want: "a=b", wantFound: true},
		{name: "empty pairs", body: "&&phone=1&&", field: "phone", want: "1", wantFound: true},
		// Rack's query parser and Python before 3.10 split at ';' as well:
		// a ';' in a pair that names the field gives two readings.
		{name: "semicolon in the value", body: "phone=1;x=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "semicolon before the name", body: "x=2;phone=1", field: "phone", want: "1", wantFound: true},
		{name: "semicolon between two spellings", body: "phone=1&x=2;phone=3", field: "phone", wantErr: ErrAmbiguous},
		{name: "semicolon, same value", body: "phone=1&x=2;phone=1", field: "phone", want: "1", wantFound: true},
		{name: "semicolon elsewhere", body: "a=1;b=2&phone=1", field: "phone", want: "1", wantFound: true},
		{name: "encoded semicolon", body: "phone=1%3Bx", field: "phone", want: "1;x", wantFound: true},
		{name: "long value", body: "phone=" + string(make128('7')) + string(make128('7')), field: "phone", want: string(make128('7')) + string(make128('7')), wantFound: true},

		{name: "missing", body: "a=1&b=2", field: "phone"},
		{name: "empty body", body: "", field: "phone"},
		{name: "other case", body: "Phone=1", field: "phone"},
		{name: "prefix", body: "phones=1&phon=2", field: "phone"},
		{name: "trailing space in the name", body: "phone+=1", field: "phone"},

		{name: "identical duplicates", body: "phone=1&phone=1", field: "phone", want: "1", wantFound: true},
		{name: "duplicates equal once decoded", body: "phone=+1&phone=%201", field: "phone", want: " 1", wantFound: true},
		{name: "duplicates differ", body: "phone=1&phone=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "empty duplicate", body: "phone=1&phone", field: "phone", wantErr: ErrAmbiguous},
		{name: "duplicate far away", body: "phone=1&a=1&b=2&c=3&phone=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "array", body: "phone[]=1", field: "phone", wantErr: ErrAmbiguous},
		{name: "indexed array", body: "phone[0]=1", field: "phone", wantErr: ErrAmbiguous},
		{name: "map", body: "phone=1&phone[x]=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "encoded brackets", body: "phone%5B%5D=1", field: "phone", wantErr: ErrAmbiguous},
		{name: "PHP leading space", body: "phone=1&+phone=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "PHP leading space alone", body: "%20phone=2", field: "phone", want: "2", wantFound: true},
		{name: "PHP NUL cut", body: "phone=1&phone%00junk=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "PHP dot", body: "challenge_id=1&challenge.id=2", field: "challenge_id", wantErr: ErrAmbiguous},
		{name: "PHP space", body: "challenge+id=2", field: "challenge_id", want: "2", wantFound: true},
		{name: "PHP unclosed bracket", body: "challenge[id=2", field: "challenge_id", want: "2", wantFound: true},
		{name: "PHP unclosed bracket then dot", body: "a[b.c=2", field: "a_b_c", want: "2", wantFound: true},
		{name: "PHP dot before an array", body: "challenge.id[]=2", field: "challenge_id", wantErr: ErrAmbiguous},
		{name: "PHP variants agree", body: "challenge_id=1&challenge.id=1", field: "challenge_id", want: "1", wantFound: true},
		{name: "bracket in a longer name", body: "phonex[]=1&phone=2", field: "phone", want: "2", wantFound: true},
		{name: "dotted name read exactly", body: "user.phone=1", field: "user.phone", want: "1", wantFound: true},
		{name: "PHP index up to its bracket", body: "a[b[c]=1", field: "a", wantErr: ErrAmbiguous},
		{name: "PHP empty base ignored, Rack and qs read it", body: "[phone]=2", field: "phone", want: "2", wantFound: true},

		// Rack 2 (Rails) drops brackets around a name; qs (Express) reads
		// a leading group as the name.
		{name: "Rack and qs: bracketed name", body: "phone=1&[phone]=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "Rack: trailing bracket", body: "phone=1&phone]=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "Rack: leading brackets", body: "phone=1&]]phone=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "Rack: unopened bracket", body: "phone=1&[phone=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "Rack: encoded brackets", body: "phone=1&%5Bphone%5D=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "Rack: bracketed, same value", body: "phone=1&[phone]=1", field: "phone", want: "1", wantFound: true},
		{name: "Rack: a map after a bracket", body: "phone]x=1", field: "phone", wantErr: ErrAmbiguous},
		{name: "Rack: trailing open bracket is a plain name", body: "phone[=1&phone=2", field: "phone", want: "2", wantFound: true},
		{name: "Rack: spaces after the separator", body: "phone=1&++phone=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "qs: a group after other text", body: "x]y[phone]=1", field: "phone"},
		{name: "qs: nested group", body: "[phone][x]=1", field: "phone", wantErr: ErrAmbiguous},
		{name: "qs: name ends at ]= after the first =", body: "phone=1&[phone=x]=2", field: "phone", wantErr: ErrAmbiguous},
		{name: "qs: ]= split, other name", body: "a=b]=c&phone=1", field: "phone", want: "1", wantFound: true},
		{name: "qs: ]= split names the field", body: "phone=1&phone=b]=c", field: "phone", wantErr: ErrAmbiguous},

		// form: names with brackets are read as each parser nests them.
		{name: "bracketed form name", body: "user[phone]=1", field: "user[phone]", want: "1", wantFound: true},
		{name: "bracketed form name, Rack spelling", body: "user[phone]=1&user]phone=2", field: "user[phone]", wantErr: ErrAmbiguous},
		{name: "bracketed form name, parent", body: "user=1&user[phone]=1", field: "user[phone]", wantErr: ErrAmbiguous},

		{name: "bad escape in the value", body: "phone=%zz", field: "phone", wantErr: ErrMalformed},
		{name: "truncated escape", body: "phone=1%2", field: "phone", wantErr: ErrMalformed},
		{name: "lone percent", body: "phone=1%", field: "phone", wantErr: ErrMalformed},
		{name: "bad escape in another field", body: "a=%&phone=1", field: "phone", wantErr: ErrMalformed},
		{name: "bad escape in a name", body: "a%g=1&phone=1", field: "phone", wantErr: ErrMalformed},
		{name: "bad escape after an ambiguity", body: "phone=1&phone=2&x=%", field: "phone", wantErr: ErrMalformed},
		{name: "invalid UTF-8 value", body: "phone=%FF1", field: "phone", wantErr: ErrMalformed},
		{name: "raw invalid UTF-8 value", body: "phone=\xff1", field: "phone", wantErr: ErrMalformed},
		{name: "invalid UTF-8 elsewhere", body: "a=%FF&phone=1", field: "phone", want: "1", wantFound: true},
		{name: "overlong UTF-8 value", body: "phone=%C0%AF1", field: "phone", wantErr: ErrMalformed},
		{name: "NUL in the value", body: "phone=1%002", field: "phone", wantErr: ErrMalformed},
		{name: "raw NUL in the value", body: "phone=1\x002", field: "phone", wantErr: ErrMalformed},
		{name: "NUL elsewhere", body: "a=%00&phone=1", field: "phone", want: "1", wantFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, found, err := FormField([]byte(tt.body), tt.field)
			if !errors.Is(err, tt.wantErr) || got != tt.want || found != tt.wantFound {
				t.Errorf("FormField(%.80q, %q) = %q, %v, %v; want %q, %v, %v", tt.body, tt.field, got, found, err, tt.want, tt.wantFound, tt.wantErr)
			}
			qgot, qfound, qerr := QueryField([]byte(tt.body), tt.field)
			if qgot != got || qfound != found || qerr != err {
				t.Errorf("QueryField differs from FormField: %q, %v, %v", qgot, qfound, qerr)
			}
		})
	}
}

func make128(c byte) []byte {
	b := make([]byte, 128)
	for i := range b {
		b[i] = c
	}
	return b
}
