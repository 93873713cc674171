package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/edge-gateway/edge/internal/testredis"
	"github.com/edge-gateway/edge/rules"
)

// TestWatchKeyFormat drives the poller a Redis-backed node runs (main.go)
// against a real redis-server, one read at a time on the test's goroutine
// with the test's clock (a loop fed ticks would start its next read while
// the test moves on, and race it): a node of a
// format 1 fleet stays on format 1; a migration reaches it at the next
// read; Redis gone for less than keyFormatStale changes nothing, and from
// keyFormatStale on the node applies every op in both formats; once Redis
// answers again, empty, the node writes back the format it last read and
// follows it; a read under another key secret's fingerprint leaves it as
// it is.
func TestWatchKeyFormat(t *testing.T) {
	r := testredis.Start(t)
	rs := redisStore(t, r.URL())
	ctx := t.Context()
	fp := keyFingerprint([]byte(secretA))
	if _, err := rs.ClaimKeyFingerprint(ctx, fp, false); err != nil { // a format 1 fleet
		t.Fatal(err)
	}
	e, err := rules.NewEngine(rules.EngineOptions{Store: rs, Secret: []byte(secretA), KeyFormats: rules.KeyFormats{Format: rules.KeyFormat1}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	clock := t0
	now := func() time.Time { return clock }
	set := func(d time.Duration) { clock = t0.Add(d) }
	w := newKeyFormatPoller(rs, e, fp, now, slog.New(slog.DiscardHandler))
	poll := func() { w.poll(ctx) } // one read, to its end, on the test's goroutine
	want := func(step string, f rules.KeyFormats) {
		t.Helper()
		if got := e.KeyFormats(); got.Format != f.Format || !got.DualUntil.Equal(f.DualUntil) {
			t.Errorf("%s: engine on %+v, want %+v", step, got, f)
		}
	}

	poll()
	want("a format 1 fleet", rules.KeyFormats{Format: rules.KeyFormat1})

	until := t0.Add(2 * time.Hour)
	if _, err := rs.MigrateKeyFormat(ctx, fp, until); err != nil {
		t.Fatal(err)
	}
	set(10 * time.Second)
	poll()
	migrating := rules.KeyFormats{Format: rules.KeyFormat2, DualUntil: until}
	want("after migrate", migrating)

	r.Kill()
	set(10*time.Second + keyFormatStale - time.Second)
	poll()
	want("Redis gone for under keyFormatStale", migrating)
	set(10*time.Second + keyFormatStale)
	poll()
	want("Redis gone for keyFormatStale", unknownKeyFormat())

	// Back, empty (testredis keeps nothing): the node writes the fleet's
	// format back as it last read it, and follows it again.
	r.Restart()
	set(time.Minute)
	var got rules.KeyFormats
	for range 50 { // the client reconnects at its own pace: bounded retries, no clock
		poll()
		if got = e.KeyFormats(); got.Format == rules.KeyFormat2 {
			break
		}
	}
	want("Redis back, empty", migrating)
	if held, err := rs.ReadKeyFormat(ctx); err != nil || held.Format != rules.KeyFormat2 || !held.DualUntil.Equal(until) || held.Fingerprint != fp {
		t.Errorf("after an empty restart Redis holds %+v, %v; want the migration written back", held, err)
	}

	if _, err := rs.ClaimKeyFingerprint(ctx, keyFingerprint([]byte("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")), true); err != nil {
		t.Fatal(err)
	}
	poll()
	want("another secret's fingerprint", migrating)
}
