package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/behaviour/adaptive"
)

// adaptiveCollector exports each adaptive rule's limiter on this node
// (docs/policy.md, "Adaptive concurrency") at scrape time, labelled by the
// rule names of the policy being served: edge_adaptive_limit, the limit the
// rule's method found from the origin's latency, and
// edge_adaptive_in_flight, its requests at the origin now. A limiter
// follows its rule's name across reloads (rules.Rule.ID); a rule a reload
// removed is no longer exported.
type adaptiveCollector struct {
	s               *Server
	limit, inFlight *prometheus.Desc
}

// registerAdaptive registers the adaptive rules' gauges.
func registerAdaptive(reg *prometheus.Registry, s *Server) {
	rule := []string{"rule"}
	reg.MustRegister(&adaptiveCollector{
		s: s,
		limit: prometheus.NewDesc("edge_adaptive_limit",
			"An adaptive rule's current limit on this node: the requests in flight its method (gradient or aimd) allows from the origin's latency, within the rule's min and max. A request over it (over its priority's share under load_shedding) is shed: 503.", rule, nil),
		inFlight: prometheus.NewDesc("edge_adaptive_in_flight",
			"Requests an adaptive rule has at the origin now on this node (forwarded and not yet answered, or held by a queue).", rule, nil),
	})
}

func (c *adaptiveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.inFlight
}

func (c *adaptiveCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.s.Policy().Rules {
		l := adaptive.LimiterOf(c.s.engine, r)
		if l == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(l.Limit()), r.Name)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(l.InFlight()), r.Name)
	}
}
