package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
)

// queueCollector reads engine.InspectQueues at each scrape. Gauges derived at scrape time rather
// than kept in memory, because the numbers live in the store: every engine replica reports the
// same depth, and a restarted one reports it at once.
type queueCollector struct {
	eng     *engine.Engine
	log     *slog.Logger
	timeout time.Duration

	depth, oldest, dead, runs, up *prometheus.Desc
}

func newQueueCollector(eng *engine.Engine, log *slog.Logger) *queueCollector {
	return &queueCollector{
		eng: eng, log: log, timeout: 5 * time.Second,
		depth: prometheus.NewDesc("queue_depth",
			"Runs ready and waiting for a worker: the autoscaler's signal.", []string{"queue"}, nil),
		oldest: prometheus.NewDesc("queue_oldest_ready_seconds",
			"Age of the oldest ready run: page when the oldest run in a queue has waited too long.", []string{"queue"}, nil),
		dead: prometheus.NewDesc("queue_dead_jobs",
			"Dead-lettered runs: a gauge, so a dead-letter queue that filled and stopped growing still shows.", []string{"queue"}, nil),
		runs: prometheus.NewDesc("queue_runs",
			"Runs by queue and state.", []string{"queue", "state"}, nil),
		up: prometheus.NewDesc("queue_stats_up",
			"1 when the queue statistics were read from the store at this scrape, else 0.", nil, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.oldest
	ch <- c.dead
	ch <- c.runs
	ch <- c.up
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	qs, err := c.eng.InspectQueues(ctx)
	if err != nil {
		// Reported as a gauge rather than a failed scrape: the process's other series stay
		// visible, and "the store is down" becomes alertable on its own.
		c.log.Warn("jobs.metrics.queues-failed", "err", err)
		c.emit(ch, c.up, 0)
		return
	}
	c.emit(ch, c.up, 1)
	for _, q := range byLabel(c.eng, qs) {
		c.emit(ch, c.depth, float64(q.Counts[store.StateReady]), q.Queue)
		c.emit(ch, c.oldest, q.OldestReadySeconds, q.Queue)
		c.emit(ch, c.dead, float64(q.Dead), q.Queue)
		for _, st := range store.States {
			c.emit(ch, c.runs, float64(q.Counts[st]), q.Queue, string(st))
		}
	}
}

// byLabel folds the queues into their labels (engine.QueueLabel): a declared queue keeps its own
// series, and the queues no worker declares (with --allow-undeclared, any name an enqueue
// brings) share engine.UndeclaredQueue, their runs summed and their oldest ready run the oldest
// of all. The store lists every queue that has runs, so without it each made-up name would be
// a scrape's series for as long as its runs are kept.
func byLabel(eng *engine.Engine, qs []engine.QueueView) []engine.QueueView {
	out := make([]engine.QueueView, 0, len(qs))
	at := make(map[string]int, len(qs))
	for _, q := range qs {
		label := eng.QueueLabel(q.Queue)
		i, ok := at[label]
		if !ok {
			at[label] = len(out)
			out = append(out, engine.QueueView{Queue: label, Counts: map[store.State]int{}})
			i = len(out) - 1
		}
		o := &out[i]
		for st, n := range q.Counts {
			o.Counts[st] += n
		}
		o.Dead += q.Dead
		o.OldestReadySeconds = max(o.OldestReadySeconds, q.OldestReadySeconds)
	}
	return out
}

// emit sends one gauge. Collect runs on promhttp's goroutines, where a panic would end the
// process, so a label value Prometheus refuses (a queue name that is not UTF-8, defined in code
// and never through the API) is logged and skipped rather than Must-ed.
func (c *queueCollector) emit(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...)
	if err != nil {
		c.log.Warn("jobs.metrics.skipped", "labels", labels, "err", err)
		return
	}
	ch <- m
}
