package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/rules"
)

// KeyBudgets is implemented by a store that bounds each rule's keys (the
// memory store): New exports its budgets as metrics when Options.Store
// has it.
type KeyBudgets interface {
	Budgets() []rules.KeyBudgetUse
}

// budgetCollector exports a memory store's per-rule key budgets
// (docs/memory-store.md) at scrape time, labelled by the rule names of the
// policy being served: a budget follows its rule's name (rules.Rule.ID),
// and one whose rule a reload removed is no longer exported.
type budgetCollector struct {
	s                              *Server
	kb                             KeyBudgets
	evictions, full, keys, maxKeys *prometheus.Desc
	markerKeys, markerFull         *prometheus.Desc
	networkFull                    *prometheus.Desc
}

func newBudgetCollector(s *Server, kb KeyBudgets) *budgetCollector {
	rule := []string{"rule"}
	return &budgetCollector{
		s: s, kb: kb,
		evictions: prometheus.NewDesc("edge_store_evictions_total",
			"Live keys the memory store evicted from a rule's key budget to make room for the rule's new keys (least recently used first; decayed state is forgotten first and not counted). A sensitive rule never evicts.", rule, nil),
		full: prometheus.NewDesc("edge_store_budget_full_total",
			"New keys of a sensitive rule answered by its on_store_error because the rule's key budget in the memory store was full of live state (also counted as edge_decisions_total store_error_*).", rule, nil),
		keys: prometheus.NewDesc("edge_store_keys",
			"Keys a rule holds in the memory store (decayed ones not yet forgotten included).", rule, nil),
		maxKeys: prometheus.NewDesc("edge_store_max_keys",
			"A rule's key budget in the memory store: its max_keys, or its share of the store's.", rule, nil),
		markerKeys: prometheus.NewDesc("edge_store_marker_keys",
			"Markers a rule holds in the memory store (bans, known visitors, exemptions), in a budget of their own beside its counters: as many as its max_keys, never evicted while they last.", rule, nil),
		markerFull: prometheus.NewDesc("edge_store_marker_full_total",
			"Markers of a rule (bans, known visitors, exemptions) the memory store did not write because the rule's marker budget was full of live markers, or their network held its share of it.", rule, nil),
		networkFull: prometheus.NewDesc("edge_store_network_full_total",
			"New keys of a rule refused (429 from the rule, for that network only) because the client's network already held its network_share of the rule's key budget in the memory store.", rule, nil),
	}
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.evictions
	ch <- c.full
	ch <- c.keys
	ch <- c.maxKeys
	ch <- c.markerKeys
	ch <- c.markerFull
	ch <- c.networkFull
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.s.Policy()
	names := make(map[[8]byte]string, len(p.Rules)+len(p.Budgets()))
	for _, r := range p.Rules {
		names[r.ID] = r.Name
	}
	for _, b := range p.Budgets() {
		names[b.ID] = b.Name
	}
	for _, b := range c.kb.Budgets() {
		name, ok := names[b.ID]
		if b.Shared || !ok {
			continue // no rule's: the shared budget (ops without MaxKeys), or a removed rule's
		}
		if b.Markers {
			ch <- prometheus.MustNewConstMetric(c.markerKeys, prometheus.GaugeValue, float64(b.Keys), name)
			ch <- prometheus.MustNewConstMetric(c.markerFull, prometheus.CounterValue, float64(b.Full+b.NetworkFull), name)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.networkFull, prometheus.CounterValue, float64(b.NetworkFull), name)
		ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(b.Evictions), name)
		ch <- prometheus.MustNewConstMetric(c.full, prometheus.CounterValue, float64(b.Full), name)
		ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(b.Keys), name)
		ch <- prometheus.MustNewConstMetric(c.maxKeys, prometheus.GaugeValue, float64(b.MaxKeys), name)
	}
}
