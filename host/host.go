// Package host runs a worker for an application's own jobs in one call: against a remote engine
// over HTTP (Options.Engine) or an in-process one (Options.Frontend), with the drain, the health
// endpoints (/healthz, /readyz) and the Prometheus metrics that the reference worker binary has.
//
//	reg, err := jobs.NewRegistry(onboarding, invoice)
//	if err != nil {
//		return err
//	}
//	err = host.Run(ctx, host.Options{Engine: "http://engine:7233", Token: os.Getenv("JOBS_TOKEN"), Registry: reg})
//
// Run returns when ctx ends or the process gets SIGINT/SIGTERM, after draining: it stops
// claiming, lets the runs in flight finish their current claim (up to DrainTimeout), unwinds the
// runs parked in memory and closes its connections. cmd/worker is Run with flags.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/worker"
)

// Options configures a hosted worker. Registry and exactly one of Engine and Frontend are
// required; everything else has a default.
type Options struct {
	// Engine is the engine's API ("http://127.0.0.1:7233"; a bare host:port means http).
	Engine string
	// Token is sent as the bearer token to Engine (a worker or admin credential).
	Token string
	// Frontend is an in-process engine (*engine.Engine) or any other frontend.Frontend, instead
	// of Engine.
	Frontend frontend.Frontend
	// Registry holds the application's jobs.
	Registry *jobs.Registry
	// Worker tunes the worker (ID, Queues, Concurrency, PollWait, HeartbeatInterval, Clock, …).
	// Its Frontend, Registry, Logger and Registerer are filled from these Options. Worker.Limits
	// is this process's budget (PerTenant, PerQueue, Global, RatePerTenant): per replica, so
	// multiply it by the replicas; a fleet-wide limit is declared on the job instead
	// (jobs.Concurrency, jobs.ConcurrencyBy, jobs.RateBy).
	Worker worker.Config
	// MetricsAddr serves /metrics, /healthz and /readyz on this address while the worker runs;
	// empty: no listener.
	MetricsAddr string
	// Registerer receives the worker's metrics. Default: a fresh registry with the Go and process
	// collectors, served on MetricsAddr.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves; default the Registerer when it is a Gatherer.
	Gatherer prometheus.Gatherer
	// DrainTimeout bounds the wait for the runs in flight at shutdown. Default 30s.
	DrainTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// NoSignals leaves SIGINT and SIGTERM alone: only ctx ends Run.
	NoSignals bool
}

// Host is a started worker with its connections and listener.
type Host struct {
	opts    Options
	worker  *worker.Worker
	client  *api.Client
	srv     *http.Server
	addr    string
	log     *slog.Logger
	served  chan struct{}
	stopped bool
}

// Run starts a worker for opts and serves until ctx ends or the process is signalled, then
// drains and returns. A nil error means a clean drain.
func Run(ctx context.Context, opts Options) error {
	if !opts.NoSignals {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	h, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	<-ctx.Done()
	h.log.Info("jobs.shutdown", "reason", context.Cause(ctx).Error(), "drain_timeout", h.opts.DrainTimeout)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.opts.DrainTimeout)
	defer cancel()
	return h.Stop(stopCtx)
}

// Start validates opts, connects, starts the worker and the metrics listener, and returns at
// once. Stop drains it.
func Start(ctx context.Context, opts Options) (*Host, error) {
	if opts.Registry == nil {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "host: Options.Registry is required (the jobs this worker runs)")
	}
	if (opts.Engine == "") == (opts.Frontend == nil) {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "host: set exactly one of Options.Engine (a remote engine's URL) and Options.Frontend (an in-process engine)")
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Host{opts: opts, log: opts.Logger}
	fe := opts.Frontend
	if opts.Engine != "" {
		url := opts.Engine
		if !strings.Contains(url, "://") {
			url = "http://" + url
		}
		c, err := api.NewClient(url, opts.Token)
		if err != nil {
			return nil, err
		}
		h.client, fe = c, c
	}
	if opts.Registerer == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		opts.Registerer = reg
	}
	if opts.Gatherer == nil {
		if g, ok := opts.Registerer.(prometheus.Gatherer); ok {
			opts.Gatherer = g
		} else {
			opts.Gatherer = prometheus.DefaultGatherer
		}
	}
	cfg := opts.Worker
	cfg.Frontend, cfg.Registry, cfg.Logger, cfg.Registerer = fe, opts.Registry, opts.Logger, opts.Registerer
	w, err := worker.New(cfg)
	if err != nil {
		h.close()
		return nil, err
	}
	h.worker, h.opts = w, opts
	// The listener comes first: an address in use fails the start before any run is claimed.
	if opts.MetricsAddr != "" {
		if err := h.listen(ctx); err != nil {
			h.close()
			return nil, err
		}
	}
	if err := w.Start(ctx); err != nil {
		h.shutdownListener(ctx)
		h.close()
		return nil, err
	}
	queues := fmt.Sprint(cfg.Queues)
	if len(cfg.Queues) == 0 {
		queues = strings.Join(opts.Registry.Queues(), ",")
	}
	h.log.Info("jobs.worker.starting", "id", w.ID(), "engine", opts.Engine, "queues", queues)
	return h, nil
}

// Worker returns the hosted worker.
func (h *Host) Worker() *worker.Worker { return h.worker }

// MetricsAddr returns the address the metrics listener is bound to ("" without one); with
// MetricsAddr ":0" it is the port picked.
func (h *Host) MetricsAddr() string { return h.addr }

// Stop drains the worker (stop claiming, finish the runs in flight until ctx ends, unwind the
// parked ones), then stops the listener and closes the client.
func (h *Host) Stop(ctx context.Context) error {
	if h.stopped {
		return nil
	}
	h.stopped = true
	err := h.worker.Stop(ctx)
	h.shutdownListener(ctx)
	h.close()
	if err != nil {
		return jobs.Wrap(jobs.CodeDraining, err, "the drain did not finish cleanly within %s", h.opts.DrainTimeout)
	}
	h.log.Info("jobs.stopped")
	return nil
}

func (h *Host) close() {
	if h.client != nil {
		h.client.Close()
	}
}

// listen serves /metrics, /healthz (the process is up) and /readyz (the worker polls the engine:
// 503 with the reason before it started, while draining, or when its polls fail).
func (h *Host) listen(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(h.opts.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.worker.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, err.Error()+"\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	var lcfg net.ListenConfig
	ln, err := lcfg.Listen(ctx, "tcp", h.opts.MetricsAddr)
	if err != nil {
		// The engine's code for a failed listen: the address is taken or not this machine's,
		// which is no malformed request.
		return jobs.Wrap(jobs.CodeListenFailed, err, "metrics: listen on %s (is the address in use, or not this machine's?)", h.opts.MetricsAddr)
	}
	h.addr = ln.Addr().String()
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	h.served = make(chan struct{})
	h.log.Info("jobs.metrics.listening", "addr", h.addr)
	go func() {
		defer close(h.served)
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("jobs.metrics.serve-failed", "err", err)
		}
	}()
	return nil
}

func (h *Host) shutdownListener(ctx context.Context) {
	if h.srv == nil {
		return
	}
	if err := h.srv.Shutdown(ctx); err != nil {
		_ = h.srv.Close()
	}
	<-h.served
}
