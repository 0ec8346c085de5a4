package scheduler

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector reads the schedules' durable state at each scrape, so every engine replica reports
// the same figures and a restarted one reports them at once.
type collector struct {
	s                      *Scheduler
	lastFire, missed, lead *prometheus.Desc
	clockBehind            *prometheus.Desc
}

func newCollector(s *Scheduler) *collector {
	return &collector{s: s,
		lastFire: prometheus.NewDesc("jobs_schedule_last_fire_timestamp_seconds",
			"The latest occurrence a schedule fired (unix seconds); 0 before its first.", []string{"schedule"}, nil),
		missed: prometheus.NewDesc("jobs_schedule_missed_total",
			"Occurrences a schedule's catch-up policy dropped after downtime.", []string{"schedule"}, nil),
		lead: prometheus.NewDesc("jobs_scheduler_leader",
			"1 when this engine's scheduler holds the leader lease, else 0.", nil, nil),
		clockBehind: prometheus.NewDesc("jobs_scheduler_clock_behind_total",
			"Schedule watermarks this engine's scheduler found ahead of its clock, set by a round on a clock that ran ahead, and pulled back to now.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lastFire
	ch <- c.missed
	ch <- c.lead
	ch <- c.clockBehind
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	lead := 0.0
	if c.s.Leading() {
		lead = 1
	}
	c.emit(ch, c.lead, prometheus.GaugeValue, lead)
	c.emit(ch, c.clockBehind, prometheus.CounterValue, float64(c.s.clockBehind.Load()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	infos, err := c.s.Inspect(ctx)
	if err != nil {
		c.s.log.Warn("jobs.metrics.schedules-failed", "err", err)
		return
	}
	for _, in := range infos {
		if in.Error != "" {
			continue
		}
		last := 0.0
		if in.LastFire != nil {
			last = float64(in.LastFire.Unix())
		}
		c.emit(ch, c.lastFire, prometheus.GaugeValue, last, in.Name)
		c.emit(ch, c.missed, prometheus.CounterValue, float64(in.Missed), in.Name)
	}
}

// emit sends one metric; a label Prometheus refuses is logged and skipped (Collect runs on
// promhttp's goroutines, where a panic would end the process).
func (c *collector) emit(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		c.s.log.Warn("jobs.metrics.skipped", "labels", labels, "err", err)
		return
	}
	ch <- m
}
