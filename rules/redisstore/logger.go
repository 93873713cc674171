package redisstore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// SetLogger routes go-redis's own messages (failed dials, pool events) to
// log at debug level, as JSON like the rest of the node's logs, instead of
// the standard library logger's plain lines on stderr. Store outages are
// counted by failclosed's metrics; these lines are detail. It is
// process-wide, as go-redis's logger is; call it once at start.
func SetLogger(log *slog.Logger) {
	redis.SetLogger(redisLogger{log})
}

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.DebugContext(ctx, "redis client", "event", fmt.Sprintf(format, v...))
	}
}
