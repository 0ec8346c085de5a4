// Command chaosworker hosts the chaos job for the harness of package chaos: a remote worker of
// the engine at --server whose steps write side-effect rows to --effects. SIGTERM stops it
// cleanly; the harness mostly SIGKILLs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/chaos"
	"github.com/ultimat3/jobs/worker"
)

func main() {
	server := flag.String("server", "", "the engine's API")
	id := flag.String("id", "", "worker id")
	effects := flag.String("effects", "", "side-effect SQLite file")
	concurrency := flag.Int("concurrency", 8, "runs at once")
	heartbeat := flag.Duration("heartbeat", 0, "lease renewal interval (0: a third of the lease)")
	traffic := flag.String("traffic", "", "file each liveness request (heartbeat, session) is tallied in; empty: none")
	flag.Parse()
	if err := run(*server, *id, *effects, *concurrency, *heartbeat, *traffic); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(server, id, effects string, concurrency int, heartbeat time.Duration, traffic string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fx, err := chaos.OpenEffects(effects)
	if err != nil {
		return err
	}
	defer fx.Close()
	var opts []api.ClientOption
	if traffic != "" {
		hc, closeTally, err := chaos.TallyingClient(traffic)
		if err != nil {
			return err
		}
		defer closeTally()
		opts = append(opts, api.WithHTTPClient(hc))
	}
	c, err := api.NewClient(server, "", opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	reg, err := jobs.NewRegistry(chaos.NewJob(fx))
	if err != nil {
		return err
	}
	w, err := worker.New(worker.Config{Frontend: c, Registry: reg, ID: id, Concurrency: concurrency,
		PollWait: 5 * time.Second, HeartbeatInterval: heartbeat, Logger: log})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := w.Start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return w.Stop(sctx)
}
