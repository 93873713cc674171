package gateway

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/rules"
)

// The gateway's extensions (package gateway/ext): Options.Extensions, each
// opened for every policy the server installs. The gateway names no
// feature: the hooks a policy's instances implement are found here once,
// at install, and the request path runs those lists.

// extensions are a Server's extensions and what it made for them at New.
type extensions struct {
	list     []ext.Extension
	counters [][]ext.Counter   // per extension, its Counted metrics
	conns    []ext.ConnWrapper // the TLS listener's wrappers, in order
	pardoner ext.Pardoner      // POST /admin/forgive's (admin_forgive.go); nil: none
}

// newExtensions registers list's counters with reg.
func newExtensions(list []ext.Extension, reg *prometheus.Registry) extensions {
	x := extensions{list: list, counters: make([][]ext.Counter, len(list))}
	for i, e := range list {
		if c, ok := e.(ext.Counted); ok {
			for _, m := range c.Counters() {
				pc := prometheus.NewCounter(prometheus.CounterOpts{Name: m.Name, Help: m.Help})
				reg.MustRegister(pc)
				x.counters[i] = append(x.counters[i], pc)
			}
		}
		if w, ok := e.(ext.ConnWrapper); ok {
			x.conns = append(x.conns, w)
		}
		if p, ok := e.(ext.Pardoner); ok && x.pardoner == nil {
			x.pardoner = p
		}
	}
	return x
}

// policyHooks are the instances of a policy's extensions and their hooks,
// in the extensions' order.
type policyHooks struct {
	insts      []ext.Instance // per extension; nil where the policy does not use it
	buffers    int            // the ext.Request buffers they took (ext.Env.Buffer)
	deciders   []ext.Decider
	forwarders []ext.Forwarder
	settlers   []ext.Settler
	responders []ext.Responder
	answerers  []ext.DecideAnswerer
	explainers []ext.Explainer
}

// open opens every extension for p.
func (s *Server) openExtensions(p *rules.Policy) (policyHooks, error) {
	h := policyHooks{insts: make([]ext.Instance, len(s.ext.list))}
	env := &ext.Env{Log: s.log}
	for i, e := range s.ext.list {
		env.Counters = s.ext.counters[i]
		in, err := e.Open(p, env)
		if err != nil {
			return policyHooks{}, err
		}
		if in == nil {
			continue
		}
		h.insts[i] = in
		h.deciders = appendHook(h.deciders, in)
		h.forwarders = appendHook(h.forwarders, in)
		h.settlers = appendHook(h.settlers, in)
		h.responders = appendHook(h.responders, in)
		h.answerers = appendHook(h.answerers, in)
		h.explainers = appendHook(h.explainers, in)
	}
	h.buffers = env.Buffers()
	return h, nil
}

// appendHook appends in to list when it has hook T (ext.Decider and the
// others).
func appendHook[T any](list []T, in ext.Instance) []T {
	if x, ok := in.(T); ok {
		return append(list, x)
	}
	return list
}

// checkExtensions refuses a list with a nil or a repeated extension.
func checkExtensions(list []ext.Extension) error {
	if list == nil {
		return errors.New("gateway: Options.Extensions is nil: pass builtin.Extensions(), or an empty list for a gateway without the features' HTTP halves")
	}
	seen := make(map[string]bool, len(list))
	for i, e := range list {
		if e == nil {
			return fmt.Errorf("gateway: extension %d is nil", i)
		}
		if seen[e.Name()] {
			return fmt.Errorf("gateway: extension %q is given twice", e.Name())
		}
		seen[e.Name()] = true
	}
	return nil
}
