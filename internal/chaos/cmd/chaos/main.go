// Command chaos runs the long chaos harness (package chaos) on SQLite and on Postgres (a
// throwaway cluster it starts, crashes once and removes) and writes the reports to CHAOS.md.
// `make chaos` runs it from the module root.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ultimat3/jobs/internal/chaos"
)

func main() {
	stores := flag.String("stores", "sqlite,postgres", "stores to run on, comma-separated")
	runs := flag.Int("runs", 2000, "runs per store")
	steps := flag.Int("steps", 5, "steps per run")
	linger := flag.Duration("linger", 50*time.Millisecond, "how long each step lingers after its side effect")
	workers := flag.Int("workers", 4, "worker processes")
	concurrency := flag.Int("concurrency", 8, "runs per worker at once")
	dur := flag.Duration("chaos", 3*time.Minute, "how long the kill loop runs per store")
	every := flag.Duration("kill-every", 3*time.Second, "mean time between kills")
	out := flag.String("out", "CHAOS.md", "report file; empty: stdout only")
	verbose := flag.Bool("v", false, "print the children's logs")
	flag.Parse()

	var log io.Writer = io.Discard
	if *verbose {
		log = os.Stderr
	}
	var b strings.Builder
	b.WriteString("# Chaos\n\n")
	b.WriteString("Written by `make chaos` (internal/chaos/cmd/chaos): an engine and worker processes, SIGKILLed at\n")
	b.WriteString("random moments; on Postgres the database is crashed (immediate stop) and restarted once too.\n")
	b.WriteString("Every step of the chaos job writes a non-idempotent side-effect row before its result is\n")
	b.WriteString("recorded. Reclaim is measured from a worker's SIGKILL to the moment none of its runs is\n")
	b.WriteString("still held by it, at the default lease (30s) and heartbeat (10s); the target is a p99 within\n")
	b.WriteString("5s. Liveness traffic: each worker tallies every heartbeat and session request it sends (as it\n")
	b.WriteString("leaves, so a killed worker's count survives it; one that found no engine listening is taken\n")
	b.WriteString("back). The yardstick is the lease-only fleet at defaults, one renewal per worker per 10s over\n")
	b.WriteString("the workers' lifetimes; the interval did not change, so the session requests are what fast\n")
	b.WriteString("reclaim adds (target: at most 2× the yardstick).\n\n")
	failed := false
	for _, st := range strings.Split(*stores, ",") {
		st = strings.TrimSpace(st)
		dir, err := os.MkdirTemp("", "jobs-chaos-")
		if err != nil {
			fatal(err)
		}
		cfg := chaos.Config{Store: st, Runs: *runs, Steps: *steps, Linger: *linger, Workers: *workers,
			Concurrency: *concurrency, Chaos: *dur, KillEvery: *every, Settle: 5 * time.Minute,
			Seed: time.Now().UnixNano(), Log: log}
		fmt.Fprintf(os.Stderr, "chaos on %s for %s…\n", st, *dur)
		rep, err := chaos.Run(context.Background(), dir, cfg)
		_ = os.RemoveAll(dir)
		if err != nil {
			fatal(fmt.Errorf("%s: %w", st, err))
		}
		fmt.Fprintf(&b, "## %s (seed %d)\n\n%s\n", st, cfg.Seed, rep.Table())
		if err := rep.Check(); err != nil {
			failed = true
			fmt.Fprintf(&b, "```\n%v\n```\n\n", err)
		}
	}
	fmt.Print(b.String())
	if *out != "" {
		if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
			fatal(err)
		}
	}
	if failed {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "chaos:", err)
	os.Exit(1)
}
