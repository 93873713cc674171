package nodestore

import (
	"context"
	"log/slog"
	"time"

	"github.com/edge-gateway/edge/failclosed"
	"github.com/edge-gateway/edge/rules/redisstore"
)

// EpochPoll is how often a Redis-backed node checks Redis's epoch
// (redisstore's CheckEpoch); a NOSCRIPT reply checks it at once.
const EpochPoll = time.Second

// epochCheckTimeout bounds one epoch check: a GET per master, off the
// request path.
const epochCheckTimeout = 2 * time.Second

// EpochWatch finds a Redis that came back without its data (its epoch
// gone or replaced: rules/redisstore's CheckEpoch) and acts on it: the
// store to check, the breaker store whose sensitive calls a reset holds,
// the current policy's reset_grace, the clock and the log.
type EpochWatch struct {
	Redis *redisstore.Store
	Store *failclosed.Store
	Grace func() time.Duration
	Now   func() time.Time
	Log   *slog.Logger
}

// Watch checks Redis's epoch at once, then on every tick and whenever the
// store saw a NOSCRIPT reply, until ctx ends (Check says what a check
// does).
func (w EpochWatch) Watch(ctx context.Context, tick <-chan time.Time) {
	w.Check(ctx) // at start: adopt the epoch
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-w.Redis.EpochWake():
		}
		w.Check(ctx)
	}
}

// Check runs one CheckEpoch, within epochCheckTimeout. A reset (Redis
// came back without its data: counters, bans and lockouts restart from
// zero) is logged at error level, once per master, and with a reset_grace
// holds the sensitive rules that do not fail open to their on_store_error
// until it has passed (failclosed's HoldSensitive). A failed check is
// only logged at debug level: the breaker reports an unreachable Redis.
func (w EpochWatch) Check(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, epochCheckTimeout)
	resets, err := w.Redis.CheckEpoch(cctx)
	cancel()
	if err != nil {
		w.Log.Debug("could not check redis's epoch", "error", err.Error())
	}
	if len(resets) == 0 {
		return
	}
	grace := w.Grace()
	var until time.Time
	if grace > 0 {
		until = w.Now().Add(grace)
		w.Store.HoldSensitive(until)
	}
	for _, r := range resets {
		attrs := []any{"epoch_key", r.Key, "found_first", r.Gone, "reset_grace", grace.String()}
		if grace > 0 {
			attrs = append(attrs, "sensitive_rules_on_store_error_until", until.UTC().Format(time.RFC3339))
		}
		w.Log.Error("REDIS CAME BACK WITHOUT ITS DATA: every counter, ban and lockout in it restarts from zero (docs/deploying.md, \"A Redis that comes back empty\")", attrs...)
	}
}
