// Package promreg registers a component's Prometheus collectors on a registry that other
// components, or other instances of the same component, may share: a process that runs two
// workers, two relays, an API server built again for its engine, or two schedulers serves one
// registry.
//
// Group registers a component's collectors all or nothing. A collector whose descriptors are
// already registered is adopted: the component counts into the registered one (a counter of the
// process, as the worker's are). Any other refusal (a series of the same name with another help
// text or other labels) unregisters what the group had registered, so the registry is left as it
// was, and is returned for the component to report as X_INVARIANT.
//
// Adopting is right for counters the process shares, not for a collector that reports one
// instance (a scheduler's leader gauge, a relay's backlog): the second instance would be served
// by the first one's collector. Such collectors are registered through a Merge, which serves each
// of its series once, combined over the instances that joined it.
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Group registers collectors on one registry, all or nothing. The zero Group and a Group on a nil
// registry register nothing.
type Group struct {
	reg   prometheus.Registerer
	added []prometheus.Collector
	err   error
}

// New returns a Group registering on reg (nothing when reg is nil).
func New(reg prometheus.Registerer) *Group { return &Group{reg: reg} }

// Register registers *c on the group's registry or, when the registry holds a collector of the
// same descriptors and of c's type, points *c at that collector, and reports that it did
// (adopted). After a refusal of the group it does nothing.
func Register[C prometheus.Collector](g *Group, c *C) (adopted bool) {
	if g.reg == nil || g.err != nil {
		return false
	}
	err := g.reg.Register(*c)
	if err == nil {
		g.added = append(g.added, *c)
		return false
	}
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) {
		g.err = err
		return false
	}
	existing, ok := already.ExistingCollector.(C)
	if !ok {
		g.err = fmt.Errorf("a %T is registered in place of a %T", already.ExistingCollector, *c)
		return false
	}
	*c = existing
	return true
}

// Refuse makes err the group's refusal: its caller found an adopted collector it cannot use.
// The first refusal stays.
func (g *Group) Refuse(err error) {
	if g.err == nil {
		g.err = err
	}
}

// Err ends the registration: nil, or the group's refusal once everything the group registered
// was unregistered again. Adopted collectors, which were there before, stay.
func (g *Group) Err() error {
	if g.err == nil {
		return nil
	}
	for _, c := range g.added {
		g.reg.Unregister(c)
	}
	g.added = nil
	return g.err
}

// All is one collector serving several: the members of a Merge are one collector each. Each
// call makes a collector of its own (a Merge tells its members apart by identity).
func All(cs ...prometheus.Collector) prometheus.Collector { return &all{cs: cs} }

type all struct{ cs []prometheus.Collector }

func (a *all) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range a.cs {
		c.Describe(ch)
	}
}

func (a *all) Collect(ch chan<- prometheus.Metric) {
	for _, c := range a.cs {
		c.Collect(ch)
	}
}
