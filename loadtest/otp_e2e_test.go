package main

import (
	"strings"
	"testing"

	"github.com/edge-gateway/edge/demo"
	"github.com/edge-gateway/edge/internal/testnet"
)

// The OTP policy, relative to this package's directory.
const otpPolicyPath = "../testdata/fixtures/policies/otp.hcl"

// otpNode is a real edge node on otp.hcl (after textual replacements) and
// the demo origin behind it, in-process on loopback listeners of their own.
type otpNode struct {
	edge, originURL string // base URLs
	origin          *demo.Origin
}

// startOTPNode starts an otpNode; replace holds old, new pairs applied to
// the policy's text before it is loaded.
func startOTPNode(t *testing.T, replace ...string) *otpNode {
	t.Helper()
	edge, originURL, origin := startEdgeOrigin(t, otpPolicyPath, replace...)
	return &otpNode{edge: edge, originURL: originURL, origin: origin}
}

// dryRun puts the named rule of otp.hcl in dry_run: it decides and counts
// but refuses nothing.
func dryRun(rule string) []string {
	return []string{`rule "` + rule + `" {`, `rule "` + rule + `" {
  dry_run = true`}
}

// The per-request timeout of the end-to-end runs: generous, since a
// machine busy with other tests (or the race detector) can stall a
// loopback answer for seconds, which would fail the run with exit 2.
const otpTestTimeout = "10s"

func (n *otpNode) pumping(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runTool(t, append([]string{"-scenario", "otp-pumping", "-target", n.edge, "-origin", n.originURL, "-phones", otpPhonesPath, "-timeout", otpTestTimeout}, args...)...)
}

func (n *otpNode) guessing(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runTool(t, append([]string{"-scenario", "otp-guessing", "-target", n.edge, "-origin", n.originURL, "-timeout", otpTestTimeout}, args...)...)
}

func wantInReport(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}

// TestOTPPumpingAgainstARealEdge: on otp.hcl, 5 of the block's 100 sends
// reach the origin (the range's limit), and none of the 36 foreign ones;
// the second run, on another area code's block, sees the same.
func TestOTPPumpingAgainstARealEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	n := startOTPNode(t)
	// Two assigned area codes, so the second run's block is never the
	// first's (a random pick met it about once in a few hundred runs).
	for run, npa := range []string{"202", "212"} {
		code, out, stderr := n.pumping(t, "-area-code", npa)
		if code != exitOK || stderr != "" {
			t.Fatalf("run %d: exit %d, stderr %q\n%s", run, code, stderr, out)
		}
		wantInReport(t, out,
			"  100 numbers, each once, each from its own client address (",
			"  attempted        100\n  answers          200 ×5, 429 ×95\n  reached origin   5     bound 5 (-range-limit): ok\n",
			"  "+strings.Join(pumpingCountries, " ")+"\n",
			"  attempted        36\n  answers          429 ×36\n  reached origin   0     bound 0 (the country allow list): ok\n",
			"otp-pumping: ok: 5 of 100 block sends and 0 of 36 foreign sends reached the origin, within their bounds (5 and 0)\n",
		)
		// What the origin itself counted, not the tool's reading of it.
		if got := n.origin.Hits()[otpSendPath]; got != int64(5*(run+1)) {
			t.Errorf("run %d: the origin counted %d sends, want %d", run, got, 5*(run+1))
		}
	}
}

// TestOTPPumpingDetectsAWeakPolicy: without the range limit, or without
// the country rule, the sends that reach the origin exceed their bound and
// the scenario exits 1.
func TestOTPPumpingDetectsAWeakPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	tests := []struct {
		name    string
		replace []string
		want    []string
	}{
		{"range rule in dry run", dryRun("otp-send-per-range"), []string{
			"  answers          200 ×100\n  reached origin   100   bound 5 (-range-limit): EXCEEDED by 95\n",
			"  reached origin   0     bound 0 (the country allow list): ok\n",
			"otp-pumping: FAIL: 100 of 100 block sends reached the origin, over the bound of 5 (-range-limit)\n",
		}},
		{"range rule removed", []string{`rule "otp-send-per-range" {
  methods   = ["POST"]
  paths     = ["/otp/send"]
  key       = ["phone_range"]
  algorithm = "sliding_window"
  limit     = 5
  period    = "1h"
  sensitive = true
}`, ""}, []string{
			"  reached origin   100   bound 5 (-range-limit): EXCEEDED by 95\n",
		}},
		{"country rule in dry run", dryRun("otp-send-countries"), []string{
			"  reached origin   5     bound 5 (-range-limit): ok\n",
			"  answers          200 ×36\n  reached origin   36    bound 0 (the country allow list): EXCEEDED by 36\n",
			"otp-pumping: FAIL: 36 of 36 foreign sends reached the origin, over the bound of 0 (the country allow list)\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := startOTPNode(t, tt.replace...)
			code, out, stderr := n.pumping(t)
			if code != exitMismatch {
				t.Fatalf("exit %d, want %d; stderr %q\n%s", code, exitMismatch, stderr, out)
			}
			if !strings.Contains(stderr, "loadtest: otp-pumping: decisions differ from the expected ones: ") {
				t.Errorf("stderr %q", stderr)
			}
			wantInReport(t, out, tt.want...)
		})
	}
}

// TestOTPPumpingWrongOrigin: an -origin that is not the edge's upstream
// sees none of the sends the edge passed on, and the run says so (exit 2)
// instead of comparing a count of nothing with the bound.
func TestOTPPumpingWrongOrigin(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	n := startOTPNode(t)
	other := startOTPNode(t)
	code, out, stderr := runTool(t, "-scenario", "otp-pumping", "-target", n.edge, "-origin", other.originURL, "-phones", otpPhonesPath, "-timeout", otpTestTimeout)
	if code != exitError || !strings.Contains(stderr, "is -origin the edge's upstream?") {
		t.Errorf("exit %d, stderr %q; want exit %d and the origin mismatch", code, stderr, exitError)
	}
	if out != "" {
		t.Errorf("stdout %q, want nothing", out)
	}
}

// TestOTPConnectionRefused: nothing listening on -target or -origin is a
// connection error, exit 2, before any report.
func TestOTPConnectionRefused(t *testing.T) {
	t.Parallel()
	closed := "http://" + testnet.DeadAddr(t)
	live := listenLoopback(t) // accepts, never answers: only dialled
	defer live.Close()
	for _, args := range [][]string{
		{"-scenario", "otp-pumping", "-phones", otpPhonesPath, "-target", closed},
		{"-scenario", "otp-guessing", "-target", closed},
		{"-scenario", "otp-guessing", "-target", "http://" + live.Addr().String(), "-origin", closed, "-timeout", "1s"},
	} {
		code, out, stderr := runTool(t, args...)
		if code != exitError || !strings.Contains(stderr, "connect") {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and a connection error", args, code, stderr, exitError)
		}
		if out != "" {
			t.Errorf("%q: stdout %q, want nothing", args, out)
		}
	}
}

// TestOTPGuessingAgainstARealEdge: on otp.hcl, 1000 guesses from ever
// new addresses, asking a new code after each refusal, get 5 + 5 + 3 = 13
// attempts through to the origin (each code's sixth attempt is refused by
// its session's 5 but spends one of the phone's 15), over 3 codes.
func TestOTPGuessingAgainstARealEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	n := startOTPNode(t)
	code, out, stderr := n.guessing(t)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, out)
	}
	wantInReport(t, out,
		"; 1000 wrong guesses, each request from its own client address (",
		"verify attempts\n  attempted        1000\n  answers          401 ×13, 429 ×987\n  reached origin   13    bound 15 (-phone-ceiling): ok\n  accepted         0\n",
		"codes sent\n  attempted        988\n  answers          200 ×3, 429 ×985\n  reached origin   3     bound 3 (-send-limit): ok\n",
		"otp-guessing: ok: 13 of 1000 verify attempts and 3 of 988 code sends reached the origin, within their bounds (15 and 3)\n",
	)
	hits := n.origin.Hits()
	if hits[otpVerifyPath] != 13 || hits[otpSendPath] != 3 {
		t.Errorf("the origin counted %d verify attempts and %d sends, want 13 and 3", hits[otpVerifyPath], hits[otpSendPath])
	}
}

// TestOTPGuessingOnWeakerPolicies: the phone's ceiling alone off still
// holds the guesser to 3 codes × 5 = 15, the bound itself; with the
// per-code limit raised too, or the per-phone send limit off, a bound is
// exceeded and the scenario exits 1.
func TestOTPGuessingOnWeakerPolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	tests := []struct {
		name    string
		replace []string
		code    int
		want    []string
	}{
		{"phone ceiling in dry run", dryRun("otp-verify-per-phone"), exitOK, []string{
			"  answers          401 ×15, 429 ×985\n  reached origin   15    bound 15 (-phone-ceiling): ok\n",
			"  reached origin   3     bound 3 (-send-limit): ok\n",
		}},
		{"phone ceiling in dry run, 50 attempts per code", append(dryRun("otp-verify-per-phone"),
			"limit     = 5\n  period    = \"15m\"", "limit     = 50\n  period    = \"15m\""), exitMismatch, []string{
			"  answers          401 ×150, 429 ×850\n  reached origin   150   bound 15 (-phone-ceiling): EXCEEDED by 135\n",
			"  reached origin   3     bound 3 (-send-limit): ok\n",
			"otp-guessing: FAIL: 150 of 1000 verify attempts reached the origin, over the bound of 15 (-phone-ceiling)\n",
		}},
		// Codes 4 and 5 pass (the range allows 5 an hour), then the range
		// refuses; the phone's ceiling still holds the attempts to 13.
		{"send limit per phone in dry run", dryRun("otp-send-per-phone"), exitMismatch, []string{
			"  reached origin   13    bound 15 (-phone-ceiling): ok\n",
			"  answers          200 ×5, 429 ×983\n  reached origin   5     bound 3 (-send-limit): EXCEEDED by 2\n",
			"otp-guessing: FAIL: 5 of 988 code sends reached the origin, over the bound of 3 (-send-limit)\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := startOTPNode(t, tt.replace...)
			code, out, stderr := n.guessing(t)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q\n%s", code, tt.code, stderr, out)
			}
			wantInReport(t, out, tt.want...)
		})
	}
}
