package promreg

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Rule combines the values one series has in a Merge's members.
type Rule int

const (
	// Sum adds the members' values up: the instances' own shares (the schedulers of a process
	// that lead, the backlogs of distinct outbox tables). The default.
	Sum Rule = iota
	// Max takes the largest: a figure every member reads from the same place, or an age.
	Max
)

// Merge is the collector of a per-instance collector on a shared registry: it is registered once
// (through RegisterMerge, which adopts the one already registered), each instance joins it with
// its own collector of the same descriptors, and it serves each series once, its value combined
// over the members by its family's Rule. Counters, gauges and untyped values are combined; any
// other series is served as the first member that has it reports it. A series no member reports
// is not served: with no member, the Merge serves nothing (a relay stopped reports no backlog
// rather than its last one).
//
// Members that join under one key report one thing (two relays on one outbox table): only the
// first of them is read. A nil key, or one that is not comparable, is a member's own.
//
// The scope names what every member must share (the engine whose schedulers join): a Merge found
// registered with another scope is refused by RegisterMerge, as the registry serves another
// engine's figures under the same names. Scope must be comparable.
type Merge struct {
	scope any
	descs []*prometheus.Desc
	rules map[string]Rule // by Desc.String()

	mu      sync.Mutex
	members []member
}

type member struct {
	key any
	c   prometheus.Collector
}

// NewMerge returns an empty Merge serving the descriptors of proto (which is not a member), with
// rules by proto's descriptors (Sum for the others).
func NewMerge(scope any, proto prometheus.Collector, rules map[*prometheus.Desc]Rule) *Merge {
	m := &Merge{scope: scope, rules: make(map[string]Rule, len(rules))}
	ch := make(chan *prometheus.Desc)
	go func() {
		proto.Describe(ch)
		close(ch)
	}()
	for d := range ch {
		m.descs = append(m.descs, d)
	}
	for d, r := range rules {
		m.rules[d.String()] = r
	}
	return m
}

// RegisterMerge registers *m with g, or points *m at the Merge already registered in its place.
// One of another scope is refused.
func RegisterMerge(g *Group, m **Merge) {
	scope := (*m).scope
	if Register(g, m) && (*m).scope != scope {
		g.Refuse(fmt.Errorf("the registry already serves these series for another %T: give each its own registry", scope))
	}
}

// Join makes c a member under key; joining again changes nothing. Members are told apart by
// identity: c is a pointer (or another comparable value).
func (m *Merge) Join(key any, c prometheus.Collector) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.members {
		if equal(x.c, c) {
			return
		}
	}
	m.members = append(m.members, member{key: key, c: c})
}

// Leave ends c's membership: its series are no longer served.
func (m *Merge) Leave(c prometheus.Collector) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, x := range m.members {
		if equal(x.c, c) {
			m.members = append(m.members[:i], m.members[i+1:]...)
			return
		}
	}
}

// Members returns how many collectors are read at a scrape (one per key).
func (m *Merge) Members() int { return len(m.distinct()) }

// Describe implements prometheus.Collector.
func (m *Merge) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: each member's series, combined.
func (m *Merge) Collect(ch chan<- prometheus.Metric) {
	type series struct {
		desc *prometheus.Desc
		d    *dto.Metric
		rule Rule
	}
	var order []*series
	byKey := map[string]*series{}
	for _, c := range m.distinct() {
		for _, metric := range collect(c) {
			d := &dto.Metric{}
			if err := metric.Write(d); err != nil {
				continue // the member's own scrape would have failed on it: it is left out
			}
			desc := metric.Desc()
			k := seriesKey(desc, d)
			s, ok := byKey[k]
			if !ok {
				s = &series{desc: desc, d: d, rule: m.rules[desc.String()]}
				byKey[k] = s
				order = append(order, s)
				continue
			}
			combine(s.d, d, s.rule)
		}
	}
	for _, s := range order {
		ch <- merged{desc: s.desc, d: s.d}
	}
}

// distinct returns the members to read: the first of each key.
func (m *Merge) distinct() []prometheus.Collector {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]prometheus.Collector, 0, len(m.members))
	for i, x := range m.members {
		dup := false
		for _, y := range m.members[:i] {
			if sameKey(x.key, y.key) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, x.c)
		}
	}
	return out
}

func sameKey(a, b any) bool { return a != nil && b != nil && equal(a, b) }

// equal is a == b, false where == would panic (values of a type that is not comparable).
func equal(a, b any) (same bool) {
	t := reflect.TypeOf(a)
	if t != reflect.TypeOf(b) || t == nil || !t.Comparable() {
		return false
	}
	defer func() {
		if recover() != nil { // a comparable type holding an incomparable value
			same = false
		}
	}()
	return a == b
}

func collect(c prometheus.Collector) []prometheus.Metric {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var out []prometheus.Metric
	for metric := range ch {
		out = append(out, metric)
	}
	return out
}

func seriesKey(desc *prometheus.Desc, d *dto.Metric) string {
	var b strings.Builder
	b.WriteString(desc.String())
	for _, l := range d.GetLabel() {
		b.WriteByte(0xff)
		b.WriteString(l.GetName())
		b.WriteByte(0xfe)
		b.WriteString(l.GetValue())
	}
	return b.String()
}

func combine(into, d *dto.Metric, rule Rule) {
	pick := func(a, b float64) float64 {
		if rule == Max {
			return max(a, b)
		}
		return a + b
	}
	switch {
	case into.Gauge != nil && d.Gauge != nil:
		v := pick(into.Gauge.GetValue(), d.Gauge.GetValue())
		into.Gauge = &dto.Gauge{Value: &v}
	case into.Counter != nil && d.Counter != nil:
		v := pick(into.Counter.GetValue(), d.Counter.GetValue())
		into.Counter = &dto.Counter{Value: &v}
	case into.Untyped != nil && d.Untyped != nil:
		v := pick(into.Untyped.GetValue(), d.Untyped.GetValue())
		into.Untyped = &dto.Untyped{Value: &v}
	}
}

// merged is a combined series.
type merged struct {
	desc *prometheus.Desc
	d    *dto.Metric
}

func (m merged) Desc() *prometheus.Desc { return m.desc }

func (m merged) Write(out *dto.Metric) error {
	out.Label, out.TimestampMs = m.d.Label, m.d.TimestampMs
	out.Gauge, out.Counter, out.Untyped = m.d.Gauge, m.d.Counter, m.d.Untyped
	out.Summary, out.Histogram = m.d.Summary, m.d.Histogram
	return nil
}
