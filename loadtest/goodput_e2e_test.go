package main

import "testing"

// TestGoodputAgainstARealEdge: the goodput scenario's two open loops
// through a real edge on bench/goodput.hcl in front of the demo origin.
// The flood comes from 4 addresses at 100 requests a second each, 100
// times the rule's 1 a second, so the rule refuses most of it; the 5
// users send one request each a second, inside the rule, and every one
// they were due to send is answered 2xx by the origin (a login with the
// demo password, an OTP send). The counts, not the latencies, are checked.
func TestGoodputAgainstARealEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("a real edge")
	}
	edge, _, origin := startEdgeOrigin(t, "../bench/goodput.hcl")
	code, out, stderr := runTool(t, "-scenario", "goodput", "-target", edge, "-rate", "400", "-connections", "8", "-clients", "4",
		"-users", "5", "-user-rate", "5", "-user-connections", "5", "-warmup", "100ms", "-duration", "1s", "-timeout", "5s")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, out)
	}
	wantInReport(t, out, "goodput flood: POST /login, wrong passwords for a million accounts, open loop at 400 req/s over 8 connections, 4 client addresses, 1s measured after a 100ms warm-up\n",
		"goodput users: POST /login and POST /otp/send by turns, each user its own account and phone, open loop at 5 req/s over 5 connections, 5 client addresses, 1s measured after a 100ms warm-up\n",
		"users served: 5 of 5 due (100.00%)")
	m := resultFields(t, out)
	flood := fieldInt(t, m, "flood_429") + fieldInt(t, m, "flood_other") + fieldInt(t, m, "flood_2xx")
	if flood+fieldInt(t, m, "flood_missed") != 400 || m["flood_errors"] != "0" {
		t.Errorf("flood: %v, want its 400 due requests, each answered", m)
	}
	// Each address gets its burst of 5 and 1 a second: at most 50 of its
	// 100 even if the run took 45 s.
	if refused := fieldInt(t, m, "flood_429"); refused < flood/2 {
		t.Errorf("flood: %d of %d refused, want most: 4 addresses at 100 times the rule", refused, flood)
	}
	if fieldInt(t, m, "user_due") != 5 || fieldInt(t, m, "user_2xx") != 5 || m["user_success"] != "1.0000" {
		t.Errorf("users: %v, want all 5 due requests served 2xx", m)
	}
	if hits := origin.Hits()["/login"] + origin.Hits()["/otp/send"]; hits < 5 {
		t.Errorf("the origin saw %d logins and OTP sends, want at least the users' 5", hits)
	}
}
