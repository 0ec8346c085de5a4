package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
)

// backfillCollector reads the ledger's one projection (engine.InspectBackfills) at each scrape:
// the passes in flight, their rows, rate, rows left and ETA.
type backfillCollector struct {
	eng *engine.Engine
	log *slog.Logger

	rows, rate, left, eta *prometheus.Desc
}

func newBackfillCollector(eng *engine.Engine, log *slog.Logger) *backfillCollector {
	l := []string{"backfill", "run"}
	return &backfillCollector{eng: eng, log: log,
		rows: prometheus.NewDesc("backfill_rows", "Rows a pass in flight has swept so far.", l, nil),
		rate: prometheus.NewDesc("backfill_rows_per_second", "A pass in flight's average rows per second.", l, nil),
		left: prometheus.NewDesc("backfill_rows_left", "Rows a pass in flight has left, by its declared count at the start.", l, nil),
		eta:  prometheus.NewDesc("backfill_eta_seconds", "When a pass in flight should end, at its rate so far.", l, nil),
	}
}

func (c *backfillCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.rows
	ch <- c.rate
	ch <- c.left
	ch <- c.eta
}

func (c *backfillCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ps, err := c.eng.InspectBackfills(ctx, store.BackfillFilter{Status: backfill.StatusRunning, Limit: 1000})
	if err != nil {
		c.log.Warn("jobs.metrics.backfills-failed", "err", err)
		return
	}
	for _, p := range ps {
		emit := func(d *prometheus.Desc, v float64) {
			if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, p.Name, p.RunID); err == nil {
				ch <- m
			}
		}
		emit(c.rows, float64(p.Rows))
		emit(c.rate, p.RowsPerSecond)
		if p.Left != nil {
			emit(c.left, float64(*p.Left))
			if p.ETA > 0 {
				emit(c.eta, p.ETA.Seconds())
			}
		}
	}
}
