package differential

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// controlOrigin is an origin that disagrees with the edge on purpose: it
// reads the phone from the X-Phone header and the email from X-Email
// (which the harness's policy never reads) when the request has one, and
// from the JSON body otherwise, as encoding/json into a map does.
func controlOrigin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/probe/", func(w http.ResponseWriter, r *http.Request) { writeEcho(w, r, "probe", nil, "") })
	mux.HandleFunc("/v/control", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		writeEcho(w, r, "control", func(f string) any {
			if h := r.Header.Get("X-Phone"); f == "phone" && h != "" {
				return h
			}
			if h := r.Header.Get("X-Email"); f == "email" && h != "" {
				return h
			}
			return m[f]
		}, "")
	})
	return mux
}

// TestHarnessDetects runs the harness's send-and-probe check against the
// control origin: values the edge counted are proved counted, a value read
// where the edge does not look is a disagreement, a value the edge refuses
// as an identity is one too, and a request the edge refuses is agreement.
// Without it, a harness whose probes always said "counted" would pass
// every stack.
func TestHarnessDetects(t *testing.T) {
	srv := httptest.NewServer(controlOrigin())
	t.Cleanup(srv.Close)
	origin := srv.Listener.Addr().String()
	run := &stackRun{stack: "control", origin: origin, edge: startEdge(t, origin), confirmed: map[string]int{}}

	tests := []struct {
		name          string
		build         func(v vals) request
		wantConfirmed int      // values read and proved counted
		wantFound     []string // fields of the disagreements, each with its verdict
		wantRefused   bool
	}{
		{
			name:          "agreement",
			build:         func(v vals) request { return typed(jsonType, jsonBody(v)) },
			wantConfirmed: 8, // phone, username, email, challenge_id, the session, the username and the email as accounts, the email as the email
		},
		{
			name: "email where the edge does not look",
			build: func(v vals) request {
				return typed(jsonType, `{"username":"`+v.User+`"}`).withHeader("X-Email", v.Email)
			},
			wantConfirmed: 2, // username, and the username as the account
			wantFound:     []string{"email: " + verdictUncounted, "account: " + verdictUncounted, "email: " + verdictUncounted},
		},
		{
			name: "phone where the edge does not look",
			build: func(v vals) request {
				return typed(jsonType, `{"username":"`+v.User+`"}`).withHeader("X-Phone", v.Victim)
			},
			wantConfirmed: 2, // username, and the username as the account
			wantFound:     []string{"phone: " + verdictUncounted},
		},
		{
			name: "phone the edge refuses alone",
			build: func(v vals) request {
				return typed(jsonType, `{"phone":"`+v.Victim+`"}`).withHeader("X-Phone", "not a phone")
			},
			wantFound: []string{"phone: " + verdictInvalid},
		},
		{
			name:        "refused by the edge",
			build:       func(v vals) request { return typed(jsonType, `{"phone":"not a phone","username":"`+v.User+`"}`) },
			wantRefused: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			confirmed, found, refused := run.confirmed["control"], len(run.found), run.refused
			run.send(t, "control", corpusCase{Name: "control/" + tt.name, Class: "control", Build: tt.build})
			if got := run.confirmed["control"] - confirmed; got != tt.wantConfirmed {
				t.Errorf("got %d values proved counted, want %d", got, tt.wantConfirmed)
			}
			var got []string
			for _, d := range run.found[found:] {
				got = append(got, d.Field+": "+d.Verdict)
			}
			if len(got) != len(tt.wantFound) {
				t.Fatalf("got disagreements %q, want %q", got, tt.wantFound)
			}
			for i := range got {
				if got[i] != tt.wantFound[i] {
					t.Errorf("got disagreement %q, want %q", got[i], tt.wantFound[i])
				}
			}
			if gotRefused := run.refused > refused; gotRefused != tt.wantRefused {
				t.Errorf("got refused %v, want %v", gotRefused, tt.wantRefused)
			}
		})
	}
}
