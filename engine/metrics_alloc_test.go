package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs/internal/race"
	"github.com/ultimat3/jobs/store"
)

// Labelling a finished run's series by its queue is on every run's path: telling a declared
// queue from a made-up one adds no allocation (a map read in a set swapped atomically, no lock),
// and made-up names, however many, all count under the one label "undeclared".
func TestQueueLabelOfADeclaredQueueAllocatesNothing(t *testing.T) {
	m := newMetrics()
	f := &fleet{jobs: map[string][]jobDecl{}, workers: map[string]store.WorkerRecord{"w": {ID: "w", Queues: []string{"parcels"}}}}
	m.queues.view = func(context.Context, bool) (*fleet, error) { return f, nil }
	now := time.Now()
	run := store.Run{Queue: "parcels", State: store.StateCancelled, CreatedAt: now.Add(-time.Second), FinishedAt: now}
	m.cancelled(run) // the series exists from here on
	if got := m.queues.label("parcels"); got != "parcels" {
		t.Fatalf("the declared queue is labelled %q", got)
	}
	for i := range 100 {
		made := run
		made.Queue = "q-" + strings.Repeat("x", i)
		m.cancelled(made)
	}
	if n := testSeries(m); n != 2 {
		t.Fatalf("%d series of jobs_total after 100 made-up queues, want 2 (parcels and %s)", n, UndeclaredQueue)
	}
	if race.Enabled {
		return // the race detector's instrumentation allocates
	}
	if a := testing.AllocsPerRun(1000, func() { m.cancelled(run) }); a != 0 {
		t.Fatalf("counting a cancelled run of a declared queue allocates %v times", a)
	}
}

func testSeries(m *metrics) int {
	ch := make(chan prometheus.Metric, 1000)
	m.jobs.Collect(ch)
	close(ch)
	return len(ch)
}
