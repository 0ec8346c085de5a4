// Command worker is the reference worker: it hosts the jobs of package examples (the org
// onboarding and the order saga) and runs them for an engine reached over HTTP (--server).
//
// SIGTERM or SIGINT drains it: it stops claiming, lets the runs in flight finish their current
// claim (up to --drain-timeout), unwinds its parked runs and exits 0.
package main

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/host"
	"github.com/ultimat3/jobs/worker"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetContext(ctx)
	return cli.Execute(root, args, stdout, stderr)
}

type options struct {
	server          string
	token           string
	id              string
	queues          string
	concurrency     int
	pollWait        time.Duration
	heartbeat       time.Duration
	onboardingSleep time.Duration
	planTimeout     time.Duration
	paymentTimeout  time.Duration
	drainTimeout    time.Duration
	metricsAddr     string
	logLevel        string
	logFormat       string
	logRuns         bool
	limits          limitFlags // limits.go
}

func newRootCmd() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the example jobs (onboarding, order saga) for an engine",
		Long: "Hosts the jobs of package examples and runs them for the engine at --server.\n\n" +
			"SIGTERM drains: stop claiming, finish the runs in flight (up to --drain-timeout), exit 0.\n" +
			"Errors print as \"X_CODE: message\" on stderr; exit 1 when the worker fails, 2 for usage.",
		Args:              cobra.NoArgs,
		RunE:              func(cmd *cobra.Command, _ []string) error { return serve(cmd, &o) },
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	f := cmd.Flags()
	f.StringVar(&o.server, "server", cli.Env("JOBS_SERVER", "http://"+api.DefaultAddr), "the engine's API [$JOBS_SERVER]")
	f.StringVar(&o.token, "token", cli.Env("JOBS_TOKEN", ""), "bearer token [$JOBS_TOKEN]")
	f.StringVar(&o.id, "id", cli.Env("JOBS_WORKER_ID", ""), "worker id in leases and logs (default host-pid-random) [$JOBS_WORKER_ID]")
	f.StringVar(&o.queues, "queues", cli.Env("JOBS_QUEUES", ""),
		"queues to poll, comma-separated, each optionally with its concurrency (orders=20); default every queue of the examples [$JOBS_QUEUES]")
	f.IntVar(&o.concurrency, "concurrency", 10, "runs per queue executing at once, for queues named without one")
	f.DurationVar(&o.pollWait, "poll-wait", 10*time.Second, "how long one long-poll waits for work")
	f.DurationVar(&o.heartbeat, "heartbeat", cli.EnvDuration("JOBS_HEARTBEAT", 0),
		"how often the leases of the runs in flight are renewed (one call for all); 0: a third of the engine's lease [$JOBS_HEARTBEAT]")
	f.DurationVar(&o.onboardingSleep, "onboarding-sleep", cli.EnvDuration("JOBS_ONBOARDING_SLEEP", examples.DefaultOnboardingSleep),
		"the onboarding's pause before it asks for a plan [$JOBS_ONBOARDING_SLEEP]")
	f.DurationVar(&o.planTimeout, "plan-timeout", cli.EnvDuration("JOBS_PLAN_TIMEOUT", examples.DefaultPlanTimeout),
		"how long the onboarding waits for plan.chosen [$JOBS_PLAN_TIMEOUT]")
	f.DurationVar(&o.paymentTimeout, "payment-timeout", cli.EnvDuration("JOBS_PAYMENT_TIMEOUT", examples.DefaultPaymentTimeout),
		"how long an order waits for payment.received before it releases its reservation [$JOBS_PAYMENT_TIMEOUT]")
	f.DurationVar(&o.drainTimeout, "drain-timeout", cli.EnvDuration("JOBS_DRAIN_TIMEOUT", 30*time.Second),
		"how long a SIGTERM waits for the runs in flight [$JOBS_DRAIN_TIMEOUT]")
	f.StringVar(&o.metricsAddr, "metrics-addr", cli.Env("JOBS_METRICS_ADDR", ""),
		"serve /metrics (jobs_total, job_leases_lost_total, …) on this address; empty: off [$JOBS_METRICS_ADDR]")
	f.StringVar(&o.logLevel, "log-level", cli.Env("JOBS_LOG_LEVEL", "info"), "debug, info, warn or error [$JOBS_LOG_LEVEL]")
	f.StringVar(&o.logFormat, "log-format", cli.Env("JOBS_LOG_FORMAT", "text"), "text or json [$JOBS_LOG_FORMAT]")
	f.BoolVar(&o.logRuns, "log-runs", true, "log one info line per claim of a run (jobs.run: outcome, duration); --log-runs=false for none")
	addLimitFlags(f, &o.limits)
	return cmd
}

// envDurations are the environment variables the duration flags default from.
var envDurations = []string{"JOBS_HEARTBEAT", "JOBS_ONBOARDING_SLEEP", "JOBS_PLAN_TIMEOUT", "JOBS_PAYMENT_TIMEOUT", "JOBS_DRAIN_TIMEOUT"}

// parseQueues reads "a,b=5" into a concurrency per queue; empty means every queue of reg.
func parseQueues(spec string, concurrency int, reg *jobs.Registry) (map[string]int, error) {
	out := map[string]int{}
	if strings.TrimSpace(spec) == "" {
		for _, q := range reg.Queues() {
			out[q] = concurrency
		}
		return out, nil
	}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, n, hasN := strings.Cut(part, "=")
		c := concurrency
		if hasN {
			v, err := strconv.Atoi(n)
			if err != nil || v < 1 {
				return nil, cli.Usage("--queues %q: the concurrency of %q must be a whole number ≥ 1", spec, name)
			}
			c = v
		}
		if name == "" {
			return nil, cli.Usage("--queues %q: a queue has no name", spec)
		}
		out[name] = c
	}
	if len(out) == 0 {
		return nil, cli.Usage("--queues %q names no queue", spec)
	}
	return out, nil
}

// serve runs the worker until SIGTERM: host.Run with the examples' registry.
func serve(cmd *cobra.Command, o *options) error {
	// cli.EnvDuration left a flag at its default for a value that is not a duration: refused
	// here, as the engine's serve does, rather than run with a default nobody asked for.
	if err := cli.CheckEnvDurations(envDurations...); err != nil {
		return err
	}
	switch {
	case o.concurrency < 1:
		return cli.Usage("--concurrency must be at least 1, got %d", o.concurrency)
	case o.onboardingSleep <= 0 || o.planTimeout <= 0 || o.paymentTimeout <= 0:
		return cli.Usage("--onboarding-sleep, --plan-timeout and --payment-timeout must be positive")
	case o.pollWait <= 0:
		return cli.Usage("--poll-wait must be positive")
	case o.drainTimeout <= 0:
		// host.Options reads zero as its default; a negative or zero flag is a mistake to say.
		return cli.Usage("--drain-timeout must be positive, got %s", o.drainTimeout)
	case o.heartbeat < 0:
		return cli.Usage("--heartbeat must not be negative")
	}
	log, err := cli.Logger(cmd.ErrOrStderr(), o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	limits, err := o.limits.config()
	if err != nil {
		return err
	}
	// --server and --token are checked here, as usage errors, rather than by host.Run's client.
	c, err := cli.NewClient(o.server, o.token)
	if err != nil {
		return err
	}
	c.Close()
	server := cli.EngineURL(o.server)
	reg := examples.NewRegistry(examples.Options{OnboardingSleep: o.onboardingSleep, PlanTimeout: o.planTimeout,
		PaymentTimeout: o.paymentTimeout})
	queues, err := parseQueues(o.queues, o.concurrency, reg)
	if err != nil {
		return err
	}
	return host.Run(cmd.Context(), host.Options{Engine: server, Token: o.token, Registry: reg, Logger: log,
		Worker: worker.Config{ID: o.id, Queues: queues, PollWait: o.pollWait, HeartbeatInterval: o.heartbeat,
			QuietRuns: !o.logRuns, Limits: limits},
		MetricsAddr: o.metricsAddr, DrainTimeout: o.drainTimeout})
}
