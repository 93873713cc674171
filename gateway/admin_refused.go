package gateway

import (
	"strconv"

	"github.com/valyala/fasthttp"
)

// adminRefused is GET /admin/refused?minutes=N (1 to 5, default 5): per
// rule, its most refused keys over the last N minutes, as keyed hashes of
// the key and the client with a count (refusedTracker), rules by name,
// keys most refused first.
func (s *Server) adminRefused(ctx *fasthttp.RequestCtx) {
	minutes := refusedMinutes
	if v := ctx.QueryArgs().Peek("minutes"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > refusedMinutes {
			adminError(ctx, fasthttp.StatusBadRequest, "minutes must be 1 to "+strconv.Itoa(refusedMinutes))
			return
		}
		minutes = n
	}
	adminJSON(ctx, fasthttp.StatusOK, map[string]any{"rules": s.refused.top(s.requestTime(ctx), minutes, s.engine.HashClient)})
}
