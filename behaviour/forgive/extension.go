package forgive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edge-gateway/edge/gateway/ext"
	"github.com/edge-gateway/edge/rules"
)

// Extension returns the gateway's part of the forgive: POST
// /admin/forgive carried out by KeyFromText, Forgive and ExemptFrom
// (ext.Pardoner). It has no part in serving requests.
func Extension() ext.Extension { return extension{} }

type extension struct{}

func (extension) Name() string { return "forgive" }

func (extension) Open(*rules.Policy, *ext.Env) (ext.Instance, error) { return nil, nil }

func (extension) MaxExempt() time.Duration { return MaxExempt }

func (extension) KeyFromText(e *rules.Engine, p *rules.Policy, r *rules.Rule, values map[string]string) (rules.Key, error) {
	k, err := KeyFromText(e, p, r, values)
	return k, named(r, err)
}

func (extension) Forgive(ctx context.Context, e *rules.Engine, now time.Time, p *rules.Policy, r *rules.Rule, values map[string]string, exempt time.Duration) (rules.Key, time.Time, error) {
	f, err := Forgive(ctx, e, now, p, r, values, exempt)
	return f.Key, f.ExemptUntil, named(r, err)
}

func (extension) ExemptFrom(e *rules.Engine, p *rules.Policy, name string, until, now time.Time) {
	ExemptFrom(e, p, name, until, now)
}

// named names r in ErrNotForgivable, for the operator.
func named(r *rules.Rule, err error) error {
	if errors.Is(err, ErrNotForgivable) {
		return fmt.Errorf("rule %s: %w", r.Name, err)
	}
	return err
}

var _ ext.Pardoner = extension{}
