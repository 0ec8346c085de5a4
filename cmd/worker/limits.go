package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/worker"
)

// limitFlags are worker.Config.Limits as flags: this process's budget, not the fleet's. They are
// read as text so that a malformed value, from a flag or the environment, is a usage error that
// names its flag rather than a silent zero.
type limitFlags struct {
	perTenant, perQueue, global, rate string
}

func addLimitFlags(f *pflag.FlagSet, l *limitFlags) {
	f.StringVar(&l.perTenant, "limit-per-tenant", cli.Env("JOBS_LIMIT_PER_TENANT", "0"),
		"runs of one tenant executing at once in this process (per replica); 0: no cap [$JOBS_LIMIT_PER_TENANT]")
	f.StringVar(&l.perQueue, "limit-per-queue", cli.Env("JOBS_LIMIT_PER_QUEUE", "0"),
		"runs of one queue executing at once in this process; lowers each queue's concurrency above it; 0: no cap [$JOBS_LIMIT_PER_QUEUE]")
	f.StringVar(&l.global, "limit-global", cli.Env("JOBS_LIMIT_GLOBAL", "0"),
		"runs executing at once in this process across its queues; 0: no cap [$JOBS_LIMIT_GLOBAL]")
	f.StringVar(&l.rate, "rate-per-tenant", cli.Env("JOBS_RATE_PER_TENANT", ""),
		"runs of one tenant this process starts per period, as N/period (100/1m); the window is in memory, so a restart resets it; empty: no rate [$JOBS_RATE_PER_TENANT]")
}

// config checks the flags and returns the LimitConfig they spell.
func (l limitFlags) config() (worker.LimitConfig, error) {
	var out worker.LimitConfig
	for _, c := range []struct {
		flag, v string
		to      *int
	}{{"--limit-per-tenant", l.perTenant, &out.PerTenant}, {"--limit-per-queue", l.perQueue, &out.PerQueue}, {"--limit-global", l.global, &out.Global}} {
		n, err := strconv.Atoi(strings.TrimSpace(c.v))
		if err != nil || n < 0 {
			return worker.LimitConfig{}, cli.Usage("%s %q: want a whole number ≥ 0", c.flag, c.v)
		}
		*c.to = n
	}
	r, err := parseRate(l.rate)
	if err != nil {
		return worker.LimitConfig{}, err
	}
	out.RatePerTenant = r
	return out, nil
}

// parseRate reads "N/period" (100/1m, 5/30s); empty is no rate.
func parseRate(s string) (worker.Rate, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return worker.Rate{}, nil
	}
	ns, per, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(strings.TrimSpace(ns))
	if !ok || err != nil || n < 1 {
		return worker.Rate{}, cli.Usage("--rate-per-tenant %q: want N/period with N ≥ 1, such as 100/1m", s)
	}
	d, err := time.ParseDuration(strings.TrimSpace(per))
	if err != nil || d <= 0 {
		return worker.Rate{}, cli.Usage("--rate-per-tenant %q: the period must be a positive duration, such as 1m", s)
	}
	return worker.Rate{N: n, Per: d}, nil
}
