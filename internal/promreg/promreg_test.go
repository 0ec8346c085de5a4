package promreg_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs/internal/promreg"
)

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name + " help"})
}

func names(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

// A second component on a registry adopts the collectors registered in its place and counts
// into them; a refusal unregisters what its group registered, and only that.
func TestGroupAdoptsOrLeavesTheRegistryAsItWas(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	a, b := counter("a_total"), counter("b_total")
	g := promreg.New(reg)
	if promreg.Register(g, &a) || promreg.Register(g, &b) {
		t.Fatal("adopted on an empty registry")
	}
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	a2, b2 := counter("a_total"), counter("b_total")
	g = promreg.New(reg)
	if !promreg.Register(g, &a2) || !promreg.Register(g, &b2) {
		t.Fatal("not adopted")
	}
	if err := g.Err(); err != nil {
		t.Fatal(err)
	}
	a2.Inc()
	if got := names(t, reg)["a_total"]; got != 1 || a2 != a {
		t.Fatalf("a second component counts into its own collector (a_total %v)", got)
	}

	// A refusal halfway: c was registered by the group, and is unregistered again; a stays.
	c, clash := counter("c_total"), prometheus.NewGauge(prometheus.GaugeOpts{Name: "b_total", Help: "another help"})
	g = promreg.New(reg)
	promreg.Register(g, &c)
	promreg.Register(g, &clash)
	if err := g.Err(); err == nil {
		t.Fatal("a clash was not refused")
	}
	got := names(t, reg)
	if _, ok := got["c_total"]; ok || len(got) != 2 {
		t.Errorf("after a refusal the registry serves %v, want a_total and b_total only", got)
	}
	// A collector of another type in place of the one asked for is refused, not adopted.
	wrong := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "a_total", Help: "a_total help"}, nil)
	g = promreg.New(reg)
	promreg.Register(g, &wrong)
	if err := g.Err(); err == nil {
		t.Error("a collector of another type was adopted")
	}
	// No registry: nothing registered, no error.
	g = promreg.New(nil)
	promreg.Register(g, &c)
	if err := g.Err(); err != nil {
		t.Error(err)
	}
}

type instance struct {
	lead, age prometheus.Gauge
	c         prometheus.Collector
}

func newInstance() *instance {
	i := &instance{
		lead: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lead", Help: "lead"}),
		age:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "age", Help: "age"}),
	}
	i.c = promreg.All(i.lead, i.age)
	return i
}

// A Merge serves each series once, combined over its members by rule; members of one key are read
// once; a member that leaves is no longer served; a Merge of another scope is refused.
func TestMergeCombinesItsMembers(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	scope := new(int)
	join := func(key any) *instance {
		t.Helper()
		i := newInstance()
		m := promreg.NewMerge(scope, i.c, map[*prometheus.Desc]promreg.Rule{i.age.Desc(): promreg.Max})
		g := promreg.New(reg)
		promreg.RegisterMerge(g, &m)
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		m.Join(key, i.c)
		return i
	}
	x, y, z := join("one"), join("two"), join("two")
	x.lead.Set(1)
	x.age.Set(5)
	y.age.Set(9)
	z.lead.Set(100) // same key as y: not read
	got := names(t, reg)
	if got["lead"] != 1 || got["age"] != 9 {
		t.Errorf("lead %v, age %v; want 1 (summed), 9 (the largest)", got["lead"], got["age"])
	}

	// Another scope is refused, and the registry left as it was.
	i := newInstance()
	m := promreg.NewMerge(new(int), i.c, nil)
	g := promreg.New(reg)
	promreg.RegisterMerge(g, &m)
	if err := g.Err(); err == nil {
		t.Error("a Merge of another scope was adopted")
	}
	if got := names(t, reg); got["lead"] != 1 {
		t.Errorf("after the refusal lead = %v, want 1", got["lead"])
	}
}

func TestAMergeWithoutMembersServesNothing(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	i := newInstance()
	m := promreg.NewMerge(nil, i.c, nil)
	reg.MustRegister(m)
	m.Join(nil, i.c)
	m.Join(nil, i.c) // once
	if m.Members() != 1 {
		t.Fatalf("%d members, want 1", m.Members())
	}
	i.lead.Set(3)
	if got := names(t, reg); got["lead"] != 3 {
		t.Fatalf("lead %v, want 3", got["lead"])
	}
	m.Leave(i.c)
	if got := names(t, reg); len(got) != 0 {
		t.Errorf("a Merge whose member left serves %v, want nothing", got)
	}
}
