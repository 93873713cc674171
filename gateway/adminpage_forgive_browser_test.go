package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestAdminPageForgives: in headless Chromium against a real node on
// login.hcl, the page's forgive button forgives a customer locked out by
// five failures: the account alone is refused with the node's words (the
// pair's rule needs the address) and the dialog stays open; with the
// address too the page names the rules forgiven, and the customer's next
// login gets through. The audit line has the page's reason.
func TestAdminPageForgives(t *testing.T) {
	chromium := chromiumPath(t)
	const token = "page-token-forgive-0123456789"
	var logs lockedBuffer
	n := startNode(t, loadPolicy(t, loginFixture), nodeOptions{adminToken: token, clock: &fakeClock{t: time.Now()}, logs: &logs})
	const client, account = "203.0.113.7", "alice@example.com"
	for range 5 {
		rawStatus(t, loginRaw(t, n, client, account, "wrong"))
	}
	if got := rawStatus(t, loginRaw(t, n, client, account, "letmein-demo")); got != http.StatusTooManyRequests {
		t.Fatalf("after five failures: got %d, want 429", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	var out lockedBuffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromiumOptions(chromium, &out)...)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tab, actions...); err != nil {
			t.Fatalf("%s: %v\nbrowser output:\n%s", what, err, out.String())
		}
	}
	waitFor := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
			t.Fatalf("waiting for %s (%s): %v\nbrowser output:\n%s", what, expr, err, out.String())
		}
	}
	if _, err := chromedp.RunResponse(tab, chromedp.Navigate("http://"+n.admin+"/")); err != nil {
		t.Fatalf("loading the admin page: %v\n%s", err, out.String())
	}
	run("giving the token", chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#token-submit")))
	run("opening the forgive dialog", chromedp.WaitVisible(chromedp.CSS("#forgive-open")),
		chromedp.Click(chromedp.CSS("#forgive-open")), chromedp.WaitVisible(chromedp.CSS("#forgive-account")))

	const reason = "ticket 4711 from the page"
	run("forgiving the account alone",
		chromedp.SendKeys(chromedp.CSS("#forgive-account"), account),
		chromedp.SendKeys(chromedp.CSS("#forgive-reason"), reason),
		chromedp.Click(chromedp.CSS("#forgive-submit")))
	waitFor("the refusal of the account alone", `document.querySelector("#forgive-error").textContent.startsWith("POST /admin/forgive: 400 Bad Request: nothing to forgive")`)
	if msg := eval[string](t, tab, `document.querySelector("#forgive-error").textContent`); !strings.Contains(msg, "login-failures-account-client needs ip too") {
		t.Errorf("the refusal reads %q, want the rule that needs the ip", msg)
	}
	if !eval[bool](t, tab, `document.querySelector("#forgive-dialog").open`) {
		t.Error("the dialog closed on a refusal")
	}
	if got := rawStatus(t, loginRaw(t, n, client, account, "letmein-demo")); got != http.StatusTooManyRequests {
		t.Fatalf("after the refused forgive: got %d, want 429 still", got)
	}

	run("forgiving the account and the address",
		chromedp.SendKeys(chromedp.CSS("#forgive-ip"), client),
		chromedp.Click(chromedp.CSS("#forgive-submit")))
	waitFor("the page to say what it forgave", `document.querySelector("#notice").textContent.startsWith("forgiven (this node): ")`)
	notice := eval[string](t, tab, `document.querySelector("#notice").textContent`)
	for _, r := range []string{"login-per-client", "login-failures-account-client", "login-accounts-per-ip", "signup-per-network"} {
		if !strings.Contains(notice, r) {
			t.Errorf("the notice %q does not name %s", notice, r)
		}
	}
	if eval[bool](t, tab, `document.querySelector("#forgive-dialog").open`) {
		t.Error("the dialog stays open after the forgive")
	}
	if got := rawStatus(t, loginRaw(t, n, client, account, "letmein-demo")); got != http.StatusOK {
		t.Errorf("the customer's login after the page's forgive: got %d, want 200", got)
	}
	if l := logs.String(); !strings.Contains(l, `"audit":"forgive"`) || !strings.Contains(l, reason) || strings.Contains(l, account) {
		t.Errorf("the audit log: want the forgive with the page's reason and no account:\n%s", l)
	}
}
