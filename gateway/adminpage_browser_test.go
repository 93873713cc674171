package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestAdminPageFiles: the page's files come from the binary with a strict
// Content-Security-Policy, never cached, and reference nothing outside the
// node; other methods are refused.
func TestAdminPageFiles(t *testing.T) {
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{adminToken: "page-token"})
	for path, f := range adminPageFiles {
		r := do(t, "GET", "http://"+n.admin+path, "")
		if r.status != http.StatusOK {
			t.Errorf("GET %s: got %d, want 200", path, r.status)
			continue
		}
		if r.body != string(f.body) {
			t.Errorf("GET %s: the body is not the embedded file", path)
		}
		for name, want := range map[string]string{
			"Content-Type":            f.contentType,
			"Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
			"Cache-Control":           "no-store",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
		} {
			if got := r.header.Get(name); got != want {
				t.Errorf("GET %s: %s = %q, want %q", path, name, got, want)
			}
		}
		if r := do(t, "POST", "http://"+n.admin+path, "{}"); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: got %d (Allow %q), want 405 (Allow GET, HEAD)", path, r.status, r.header.Get("Allow"))
		}
	}
	// Every src and href of the page is a path on this node (no scheme, no
	// host, no protocol-relative //), and each is a file the node serves.
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(adminIndexHTML), -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references %d files, want its script, style sheet and icon", len(refs))
	}
	for _, m := range refs {
		if !strings.HasPrefix(m[1], "/") || strings.HasPrefix(m[1], "//") {
			t.Errorf("index.html references %q, want a path on the node", m[1])
		} else if _, ok := adminPageFiles[m[1]]; !ok {
			t.Errorf("index.html references %q, which the node does not serve", m[1])
		}
	}
	if strings.Contains(string(adminIndexHTML), "<script>") || strings.Contains(string(adminIndexHTML), " style=") {
		t.Error("index.html has inline script or style, which its own CSP refuses")
	}
}

// browserLog collects what a tab reports: console errors and warnings,
// uncaught exceptions, browser log entries (CSP violations among them),
// and every request it sends.
type browserLog struct {
	mu       sync.Mutex
	problems []string      // console errors, exceptions, log errors and warnings
	requests []string      // URLs of every request sent
	admin    string        // the admin API's URL prefix: its 401 and 501 answers are expected
	csp      chan struct{} // closed at the first CSP violation reported
	cspOnce  sync.Once
}

func (l *browserLog) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			l.problems = append(l.problems, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		l.problems = append(l.problems, "exception: "+msg)
	case *cdplog.EventEntryAdded:
		e := ev.Entry
		if e.Level != cdplog.EntryLevelError && e.Level != cdplog.EntryLevelWarning {
			return
		}
		// A non-2xx answer of the admin API is logged as a network error;
		// the page shows those itself, and the test asserts it does.
		if e.Source == cdplog.EntrySourceNetwork && strings.HasPrefix(e.URL, l.admin) {
			return
		}
		l.problems = append(l.problems, string(e.Source)+" "+string(e.Level)+": "+e.Text+" "+e.URL)
		if strings.Contains(e.Text, "Content Security Policy") {
			l.cspOnce.Do(func() { close(l.csp) })
		}
	case *network.EventRequestWillBeSent:
		l.requests = append(l.requests, ev.Request.URL)
	}
}

func (l *browserLog) snapshot() (problems, requests []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.problems), slices.Clone(l.requests)
}

// TestAdminPageInBrowser is issue 13's real-browser check of the admin
// page, in headless Chromium against a real node on foundation.hcl: the
// page loads with no console error and no request outside the node; a
// wrong token is refused on the page; given the token, it shows the
// running policy's rules; it shows live refusal rates from real refused
// requests and the recent refusals; an error of the API shows plainly (a
// toggle for over 24 h); and its dry-run toggles, of a rule and of the
// node, change what the node does to the next real request (refused →
// forwarded as dry_run_deny → refused again).
//
// The node's clock is fake and never moves, so trace-gcra (5 a second,
// burst 5, per IP) refuses every request after its fifth for the whole
// test, however slow the machine: its bucket never refills.
func TestAdminPageInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	const token = "page-token-0123456789"
	var logs lockedBuffer
	n := startNode(t, loadPolicy(t, foundation), nodeOptions{
		adminToken: token,
		clock:      &fakeClock{t: time.Now()},
		logs:       &logs,
	})
	base := "http://" + n.admin

	// A hang guard for the whole test, far above what it takes (starting
	// Chromium, and a few of the page's 2 s polls); cancelling it kills
	// the browser. Cleanups run last-in first-out: the browser stops
	// before the node.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	var out lockedBuffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromiumOptions(chromium, &out)...)
	t.Cleanup(cancelAlloc) // waits for the browser process to end
	tab, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil { // starts the browser and the tab
		t.Fatalf("starting %s: %v\n%s", chromium, err, out.String())
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\nbrowser output:\n%s", append(args, out.String())...)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tab, actions...); err != nil {
			fail("%s: %v", what, err)
		}
	}
	// waitFor waits until the JavaScript expression is true on the page.
	waitFor := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
			fail("waiting for %s (%s): %v", what, expr, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		return eval[string](t, tab, `document.querySelector(`+jsString(sel)+`)?.textContent ?? ""`)
	}
	bl := &browserLog{admin: base + "/admin/", csp: make(chan struct{})}
	if err := chromedp.Listen(tab, bl.listen); err != nil {
		fail("listening to the tab: %v", err)
	}
	// checkClean asserts no console problem and no request outside the
	// node since its last call.
	var problemsSeen, requestsSeen int
	checkClean := func(when string) {
		t.Helper()
		problems, requests := bl.snapshot()
		problems, requests = problems[problemsSeen:], requests[requestsSeen:]
		problemsSeen, requestsSeen = problemsSeen+len(problems), requestsSeen+len(requests)
		for _, p := range problems {
			t.Errorf("%s: the page reported %s", when, p)
		}
		for _, u := range requests {
			if !strings.HasPrefix(u, base+"/") {
				t.Errorf("%s: the page requested %s, outside the node (%s)", when, u, base)
			}
		}
	}

	// The page loads, asks for the token, and sends nothing to the API
	// before it has one.
	resp, err := chromedp.RunResponse(tab, chromedp.Navigate(base+"/"))
	if err != nil {
		fail("loading the admin page: %v", err)
	}
	if resp.Status != 200 {
		fail("the admin page answered %d", resp.Status)
	}
	run("waiting for the token field", chromedp.WaitVisible(chromedp.CSS("#token")))
	waitFor("the page's script to run", `document.activeElement?.id === "token"`)
	_, requests := bl.snapshot()
	for _, want := range []string{"/", "/app.js", "/style.css"} {
		if !slices.Contains(requests, base+want) {
			t.Errorf("the page did not load %s (requests %q)", want, requests)
		}
	}
	for _, u := range requests {
		if strings.HasPrefix(u, base+"/admin/") {
			t.Errorf("the page called %s before it had a token", u)
		}
	}
	checkClean("loading the page")

	// A wrong token: the page says the node refused it, forgets it, and
	// asks again.
	run("typing a wrong token",
		chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"),
		chromedp.Click(chromedp.CSS("#token-submit")))
	waitFor("the refusal of a wrong token", `document.querySelector("#login-error").textContent.includes("401 Unauthorized")`)
	if msg := text("#login-error"); !strings.Contains(msg, "missing or wrong admin token") {
		t.Errorf("a wrong token: the page says %q, want the node's error message", msg)
	}
	stored := eval[string](t, tab, `sessionStorage.getItem("edge-admin-token") ?? ""`)
	if stored != "" {
		t.Errorf("a refused token stays in session storage: %q", stored)
	}
	run("waiting for the token form again", chromedp.WaitVisible(chromedp.CSS("#token")))

	// The right token: kept in this tab's session storage only, sent as a
	// bearer token.
	run("typing the token",
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#token-submit")))
	run("waiting for the rules", chromedp.WaitVisible(chromedp.CSS("#rules")))
	where := eval[struct {
		Session, Cookie string
		Local           int
	}](t, tab, `({session: sessionStorage.getItem("edge-admin-token") ?? "", cookie: document.cookie, local: localStorage.length})`)
	if where.Session != token || where.Cookie != "" || where.Local != 0 {
		t.Errorf("the token is kept as session %q, cookie %q, %d local storage items; want it in session storage only", where.Session, where.Cookie, where.Local)
	}

	// The running policy's rules, in its order.
	var want []string
	for _, r := range n.srv.Policy().Rules {
		want = append(want, r.Name)
	}
	waitFor("a row per rule", `document.querySelectorAll("#rules tbody tr").length === `+jsNumber(len(want)))
	got := eval[[]string](t, tab, `[...document.querySelectorAll("#rules tbody tr")].map(r => r.dataset.rule)`)
	if !slices.Equal(got, want) {
		t.Errorf("the page shows rules %q, want the running policy's %q", got, want)
	}
	if s := text(`tr[data-rule="api-shadow-tight"]`); !strings.Contains(s, "dry-run (policy)") {
		t.Errorf("api-shadow-tight (dry_run = true in the policy) reads %q, want it in dry-run by the policy", s)
	}
	// Removing a toggle never overrides the policy's dry_run, so the page
	// offers no enforce button for it (docs/operations.md, "The admin
	// page"), not even a disabled one; its dry-run cell says why.
	if eval[bool](t, tab, `document.querySelector('tr[data-rule="api-shadow-tight"] button.toggle') !== null`) {
		t.Error("api-shadow-tight (dry_run = true in the policy) has an enforce button, which could not enforce it")
	}
	if s := eval[string](t, tab, `document.querySelector('tr[data-rule="api-shadow-tight"] td.dryrun-on').title`); !strings.Contains(s, "only a toggle of its own can be removed here") {
		t.Errorf("api-shadow-tight's dry-run cell title %q, want why it cannot be enforced here", s)
	}
	if s := text(`tr[data-rule="trace-gcra"]`); !strings.Contains(s, "/trace/gcra") || !strings.Contains(s, "5 / 1s (gcra)") || !strings.Contains(s, "enforcing") {
		t.Errorf("trace-gcra reads %q, want its path, its limit and enforcing", s)
	}
	checkClean("showing the rules")

	// trace-gcra refuses the sixth request.
	gcra := func() int {
		t.Helper()
		return do(t, "GET", "http://"+n.addr+"/trace/gcra", "").status
	}
	var statuses []int
	for range 6 {
		statuses = append(statuses, gcra())
	}
	if want := []int{200, 200, 200, 200, 200, 429}; !slices.Equal(statuses, want) {
		t.Fatalf("GET /trace/gcra: got %v, want %v", statuses, want)
	}

	// Live rates: refused requests, sent until the page shows trace-gcra
	// refusing at a rate over 0; once they stop, the rate falls back to 0
	// and the total matches the node's own count.
	rateOf := func(rule, cls string) string {
		t.Helper()
		return eval[string](t, tab, `document.querySelector('tr[data-rule=`+jsString(rule)+`] td.`+cls+`')?.dataset.rate ?? ""`)
	}
	for rateOf("trace-gcra", "refuse") == "" || rateOf("trace-gcra", "refuse") == "0" {
		if st := gcra(); st != 429 {
			t.Fatalf("GET /trace/gcra after the burst: got %d, want 429", st)
		}
		if ctx.Err() != nil {
			fail("the page never showed a refusal rate for trace-gcra")
		}
	}
	waitFor("trace-gcra's refusal rate to fall back to 0", `document.querySelector('tr[data-rule="trace-gcra"] td.refuse').dataset.rate === "0"`)
	denied := n.decisions("trace-gcra", "deny")
	if s := text(`tr[data-rule="trace-gcra"] td.refuse .total`); s != jsNumber(denied)+" total" {
		t.Errorf("trace-gcra's refusals read %q, want %d total (edge_decisions_total)", s, denied)
	}
	if s := rateOf("trace-gcra", "allow"); s != "0" {
		t.Errorf("trace-gcra's allow rate reads %q while every request is refused, want 0", s)
	}

	// Recent refusals: every refusal of trace-gcra came from one client on
	// one key, so the page lists one row with all of them.
	waitFor("trace-gcra's refusals", `document.querySelectorAll('#refused [data-rule="trace-gcra"] tbody tr').length > 0`)
	rows := eval[[][]string](t, tab, `[...document.querySelectorAll('#refused [data-rule="trace-gcra"] tbody tr')].map(tr => [...tr.cells].map(c => c.textContent))`)
	if len(rows) != 1 || len(rows[0]) != 3 || rows[0][2] != jsNumber(denied) || !regexp.MustCompile(`^[0-9a-f]+$`).MatchString(rows[0][0]+rows[0][1]) {
		t.Errorf("trace-gcra's recent refusals read %q, want one row: the key's and the client's hex hashes and %d", rows, denied)
	}

	// The toggle: dry-run trace-gcra, with a reason. A duration over the
	// node's 24 h is refused, and the page says so plainly, with the
	// node's own words, and keeps the dialog open; 30 minutes is taken.
	const reason = "incident 4711: false positives on /trace/gcra"
	toggle := func(wantDryRun bool) {
		t.Helper()
		sel := `tr[data-rule="trace-gcra"] button.toggle`
		run("opening the toggle", chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS("#toggle-reason")))
		run("filling the toggle", chromedp.SendKeys(chromedp.CSS("#toggle-reason"), reason))
		if wantDryRun {
			run("asking for too long", chromedp.SetValue(chromedp.CSS("#toggle-for"), "25h"), chromedp.Click(chromedp.CSS("#toggle-submit")))
			waitFor("the refusal of 25h", `document.querySelector("#toggle-error").textContent.startsWith("POST /admin/dry-run: 400 Bad Request: ")`)
			if st := gcra(); st != 429 {
				t.Errorf("GET /trace/gcra after a refused toggle: got %d, want 429", st)
			}
			run("setting the duration", chromedp.SetValue(chromedp.CSS("#toggle-for"), "30m"))
		}
		run("applying the toggle", chromedp.Click(chromedp.CSS("#toggle-submit")))
	}
	toggle(true)
	waitFor("trace-gcra in dry-run", `document.querySelector('tr[data-rule="trace-gcra"]').dataset.dryRun === "true"`)
	if s := text(`tr[data-rule="trace-gcra"]`); !strings.Contains(s, "until") || !strings.Contains(s, reason) {
		t.Errorf("trace-gcra after the toggle reads %q, want its expiry and the reason", s)
	}
	if s := text("#notice"); !strings.Contains(s, "rule trace-gcra: dry-run until") {
		t.Errorf("after the toggle the page says %q, want the rule's dry-run and its expiry", s)
	}
	if !strings.Contains(logs.String(), reason) {
		t.Errorf("the toggle's reason is not in the audit log:\n%s", logs.String())
	}

	// The node now forwards what it refused, counted as dry_run_deny.
	hits, shadow := n.hits(t)["/trace/gcra"], n.decisions("trace-gcra", "dry_run_deny")
	if st := gcra(); st != 200 {
		t.Errorf("GET /trace/gcra in dry-run: got %d, want 200 (forwarded)", st)
	}
	if got := n.hits(t)["/trace/gcra"]; got != hits+1 {
		t.Errorf("the origin heard %d /trace/gcra, want %d", got, hits+1)
	}
	if got := n.decisions("trace-gcra", "dry_run_deny"); got != shadow+1 {
		t.Errorf("trace-gcra dry_run_deny: got %d, want %d", got, shadow+1)
	}

	// Enforce again from the page: refused again.
	toggle(false)
	waitFor("trace-gcra enforcing", `document.querySelector('tr[data-rule="trace-gcra"]').dataset.dryRun === "false"`)
	if st := gcra(); st != 429 {
		t.Errorf("GET /trace/gcra after enforcing again: got %d, want 429", st)
	}
	if s := text("#notice"); s != "rule trace-gcra: enforcing again" {
		t.Errorf("after enforcing again the page says %q", s)
	}

	// The node-wide toggle: every rule in dry-run, then enforcing again.
	run("opening the node-wide toggle", chromedp.Click(chromedp.CSS("#node-toggle")), chromedp.WaitVisible(chromedp.CSS("#toggle-reason")))
	run("filling the node-wide toggle",
		chromedp.SendKeys(chromedp.CSS("#toggle-reason"), reason),
		chromedp.SetValue(chromedp.CSS("#toggle-for"), "30m"),
		chromedp.Click(chromedp.CSS("#toggle-submit")))
	waitFor("node-wide dry-run", `document.querySelector("#node-state").textContent.startsWith("node-wide dry-run until")`)
	waitFor("every rule in dry-run", `[...document.querySelectorAll("#rules tbody tr")].every(r => r.dataset.dryRun === "true")`)
	if st := gcra(); st != 200 {
		t.Errorf("GET /trace/gcra in node-wide dry-run: got %d, want 200 (forwarded)", st)
	}
	run("opening the node-wide toggle", chromedp.Click(chromedp.CSS("#node-toggle")), chromedp.WaitVisible(chromedp.CSS("#toggle-reason")))
	run("filling the node-wide toggle",
		chromedp.SendKeys(chromedp.CSS("#toggle-reason"), reason),
		chromedp.Click(chromedp.CSS("#toggle-submit")))
	waitFor("enforcing node-wide", `document.querySelector("#node-state").textContent === "enforcing"`)
	if st := gcra(); st != 429 {
		t.Errorf("GET /trace/gcra after node-wide enforcing: got %d, want 429", st)
	}
	checkClean("the toggles")

	// The listener sees CSP violations, so the checks above could fail:
	// the page's CSP refuses an inline script, and the browser says so.
	ran := eval[bool](t, tab,
		`(() => { const s = document.createElement("script"); s.textContent = "window.inlineRan = true"; document.head.append(s); return window.inlineRan === true })()`)
	if ran {
		t.Error("an inline script ran: the page's CSP does not hold")
	}
	select {
	case <-bl.csp:
	case <-ctx.Done():
		problems, _ := bl.snapshot()
		t.Errorf("no CSP violation reported for an inline script (reports %q): the console check sees nothing", problems)
	}
	if t.Failed() {
		t.Logf("browser output:\n%s", out.String())
	}
}

// eval evaluates a JavaScript expression in the tab.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func jsNumber(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
