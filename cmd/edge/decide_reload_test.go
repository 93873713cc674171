package main

import (
	"os"
	"strings"
	"testing"
)

// TestReloadNamesADecideListenChange: decide_listen is bound at start, so
// a reload that adds, removes or moves it goes through but says, in its
// warnings, what the running node does instead.
func TestReloadNamesADecideListenChange(t *testing.T) {
	plain := reloadPolicy(2, "")
	with := func(addr string) string {
		return strings.Replace(plain, "edge {\n", "edge {\n  decide_listen = \""+addr+"\"\n", 1)
	}
	for _, tc := range []struct {
		name, start, new, want string
	}{
		{"adding", plain, with("127.0.0.1:18081"), "decide_listen: no decision-only listener was opened at start"},
		{"removing", with("127.0.0.1:18081"), plain, "decide_listen: the decision-only listener on 127.0.0.1:18081 stays open but answers 503"},
		{"moving", with("127.0.0.1:18081"), with("127.0.0.1:18082"), "decide_listen: the decision-only listener stays on 127.0.0.1:18081"},
		{"unchanged", with("127.0.0.1:18081"), strings.Replace(with("127.0.0.1:18081"), "limit  = 2", "limit  = 3", 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startReloadNode(t, tc.start)
			if err := os.WriteFile(n.path, []byte(tc.new), 0o644); err != nil {
				t.Fatal(err)
			}
			res := n.rl.reload("signal")
			warnings := strings.Join(res.Warnings, "\n")
			if !res.OK {
				t.Fatalf("reload refused: %+v", res)
			}
			if tc.want == "" && strings.Contains(warnings, "decide_listen") {
				t.Errorf("an unchanged decide_listen warned: %s", warnings)
			}
			if tc.want != "" && !strings.Contains(warnings, tc.want) {
				t.Errorf("warnings %q, want %q", warnings, tc.want)
			}
		})
	}
}
