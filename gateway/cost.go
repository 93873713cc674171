package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/edge-gateway/edge/behaviour/cost"
	"github.com/edge-gateway/edge/rules"
)

// Weighted costs at the gateway (docs/policy.md, "cost"; behaviour/cost):
// a cost header's every line reaches the engine (cost.MultiHeader), the
// origin's settle_from headers are read by Engine.Settle and never relayed
// to the client, and the values it had to clamp are counted.

// HeaderAll returns every line of request header name (cost.MultiHeader):
// fasthttp's PeekAll, valid until the next PeekAll.
func (f *fields) HeaderAll(name string) [][]byte { return f.r.Header.PeekAll(name) }

var _ cost.MultiHeader = (*fields)(nil)

// stripSettleHeaders deletes the policy's settle_from headers from the
// origin's answer: like X-Edge-Outcome, they are the origin's word to the
// edge, not to the client.
func stripSettleHeaders(p *rules.Policy, h *fasthttp.ResponseHeader) {
	for _, name := range p.SettleHeaders() {
		h.DelBytes(name)
	}
}

// countSettleInvalid counts the settle_from values the request's Settle
// clamped or ignored (edge_settle_invalid_total).
func (s *Server) countSettleInvalid(rs *reqState) {
	if n := cost.SettleInvalid(rs.sc); n > 0 {
		s.m.settleInvalid.Add(float64(n))
	}
}

func (m *metrics) registerCost(reg *prometheus.Registry) {
	m.settleInvalid = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edge_settle_invalid_total",
		Help: "settle_from values from the origin that were not an integer (the charged cost stood), negative (read as 0) or above the rule's max_cost (read as max_cost).",
	})
	reg.MustRegister(m.settleInvalid)
}
