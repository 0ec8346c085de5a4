package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.uber.org/fx"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/store/sqlite"
)

// dbOptions choose the store: Postgres when a database URL names one, else the embedded SQLite
// file under the data directory.
type dbOptions struct {
	url     string
	schema  string
	dataDir string
	// writeImplied: postgres.Config.WriteImpliedEvents, for a rolling upgrade.
	writeImplied bool
}

func (o *dbOptions) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.url, "database-url", cli.Env("DATABASE_URL", ""),
		"Postgres URL (postgres:// or postgresql://); empty uses SQLite under --data-dir [$DATABASE_URL]")
	f.StringVar(&o.schema, "database-schema", cli.Env(envSchema, "jobs"),
		"Postgres schema holding the engine's tables [$JOBS_DB_SCHEMA]")
	f.StringVar(&o.dataDir, "data-dir", cli.Env("JOBS_DATA_DIR", "data"),
		"directory of the SQLite database, jobs.db [$JOBS_DATA_DIR]")
	f.BoolVar(&o.writeImplied, "database-write-implied-events", cli.EnvBool(envWriteImplied, false),
		"Postgres: write every run's first and last events as history rows too, while engines of an older version (which cannot rebuild them from the run's row) share the database in a rolling upgrade [$JOBS_DB_WRITE_IMPLIED_EVENTS]")
}

// envWriteImplied sets --database-write-implied-events, envSchema --database-schema,
// envNoScheduler --no-scheduler.
const (
	envWriteImplied = "JOBS_DB_WRITE_IMPLIED_EVENTS"
	envSchema       = "JOBS_DB_SCHEMA"
	envNoScheduler  = "JOBS_NO_SCHEDULER"
	envAllowUndecl  = "JOBS_ALLOW_UNDECLARED"
	envLogRuns      = "JOBS_LOG_RUNS"
)

// postgres reports whether the options name Postgres, refusing a URL of any other database
// rather than silently falling back to SQLite (DATABASE_URL is often set for something else).
// The refusal names a URL's scheme and nothing more of the value: what is not a URL may be a
// key=value connection string ("host=db password=…"), shown nowhere.
func (o *dbOptions) postgres() (bool, error) {
	if o.url == "" {
		return false, nil
	}
	if strings.HasPrefix(o.url, "postgres://") || strings.HasPrefix(o.url, "postgresql://") {
		return true, nil
	}
	if scheme, ok := urlScheme(o.url); ok {
		return false, jobs.Errorf(jobs.CodeDriverUnavailable,
			"--database-url / DATABASE_URL names a %q database; the engine runs on Postgres (postgres://…) or, with no URL, on SQLite", scheme)
	}
	return false, jobs.Errorf(jobs.CodeDriverUnavailable,
		"--database-url / DATABASE_URL is not a URL (a key=value connection string is not taken; the value is not shown, as it may hold a password); the engine runs on Postgres, named as postgres://user@host/db, or, with no URL, on SQLite")
}

// urlScheme returns the scheme of a value written as a URL, "scheme://…", and false for anything
// else. Only the scheme is read, so a URL that fails to parse further still has one.
func urlScheme(s string) (string, bool) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" || rest == "" {
		return "", false
	}
	for i, c := range scheme {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || (c < '0' || c > '9') && c != '+' && c != '-' && c != '.') {
			return "", false
		}
	}
	return scheme, true
}

// check refuses flags that would be silently ignored: a schema names a Postgres schema, and
// without a URL the engine runs on SQLite, which has none. The environment form is refused as the
// flag is: a deployment that sets $JOBS_DB_SCHEMA means Postgres, and one whose $DATABASE_URL
// went missing would otherwise start on an empty SQLite file under --data-dir.
func (o *dbOptions) check(cmd *cobra.Command) error {
	if o.url == "" && cmd.Flags().Changed("database-schema") {
		return cli.Usage("--database-schema %q needs --database-url (or $DATABASE_URL): without one the engine runs on SQLite, which has no schemas", o.schema)
	}
	if v := os.Getenv(envSchema); o.url == "" && v != "" {
		return cli.Usage("$%s %q needs --database-url (or $DATABASE_URL): without one the engine runs on SQLite, which has no schemas", envSchema, v)
	}
	if err := cli.CheckEnvBools(envWriteImplied); err != nil {
		return err
	}
	if o.url == "" && o.writeImplied {
		return cli.Usage("--database-write-implied-events needs --database-url (or $DATABASE_URL): SQLite writes every event already")
	}
	return nil
}

func (o *dbOptions) sqlitePath() string { return filepath.Join(o.dataDir, "jobs.db") }

// describe names the database for logs, without the URL's password.
func (o *dbOptions) describe() string {
	if pg, _ := o.postgres(); pg {
		host := o.url
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:]
		} else {
			host = strings.SplitN(strings.SplitN(host, "://", 2)[1], "/", 2)[0]
		}
		host, _, _ = strings.Cut(host, "?")
		return fmt.Sprintf("postgres %s (schema %s)", host, o.schema)
	}
	return "sqlite " + o.sqlitePath()
}

func (o *dbOptions) open(ctx context.Context, log *slog.Logger) (store.Store, error) {
	pg, err := o.postgres()
	if err != nil {
		return nil, err
	}
	if pg {
		return postgres.Open(ctx, postgres.Config{URL: o.url, Schema: o.schema, Logger: log,
			WriteImpliedEvents: o.writeImplied})
	}
	return sqlite.Open(ctx, sqlite.Config{Path: o.sqlitePath()})
}

// migrate brings the schema up to date and returns how many migrations it applied.
func (o *dbOptions) migrate(ctx context.Context) (int, error) {
	pg, err := o.postgres()
	if err != nil {
		return 0, err
	}
	if pg {
		return postgres.MigrateCount(ctx, postgres.Config{URL: o.url, Schema: o.schema})
	}
	// SQLite migrates as it opens: the file is the engine's alone, so there is no separate
	// deploy step to coordinate.
	st, err := sqlite.Open(ctx, sqlite.Config{Path: o.sqlitePath()})
	if err != nil {
		return 0, err
	}
	return st.Migrated(), st.Close()
}

type serveOptions struct {
	db           dbOptions
	addr         string
	token        string
	maxBody      int64
	drainTimeout time.Duration
	lease        time.Duration
	sessionGrace time.Duration
	logLevel     string
	logFormat    string
	// allowUndeclared accepts enqueues of jobs no worker has declared (see engine.Config).
	allowUndeclared bool
	// Role tokens (api.Credential) and the explicit opt-out of authentication beyond loopback.
	workerToken, operatorToken, viewerToken string
	credentials                             []string
	allowUnauthenticated                    bool
	noScheduler                             bool
	logRuns                                 bool
	retention                               retentionFlags // serve's retention flags (retention.go)
}

func (o *serveOptions) flags(cmd *cobra.Command) {
	o.db.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", cli.Env("JOBS_ADDR", api.DefaultAddr), "address the API listens on [$JOBS_ADDR]")
	f.StringVar(&o.token, "token", cli.Env("JOBS_TOKEN", ""), "bearer token every request must carry; empty: none [$JOBS_TOKEN]")
	f.Int64Var(&o.maxBody, "max-body", 2<<20, "largest request body accepted, in bytes")
	f.DurationVar(&o.drainTimeout, "drain-timeout", cli.EnvDuration("JOBS_DRAIN_TIMEOUT", 30*time.Second),
		"how long a SIGTERM waits for requests and commits in flight [$JOBS_DRAIN_TIMEOUT]")
	f.DurationVar(&o.lease, "lease", cli.EnvDuration("JOBS_LEASE", 30*time.Second),
		"visibility window of a claim; workers renew it every third by default, and a run whose worker vanished without a trace is reclaimed after it [$JOBS_LEASE]")
	f.DurationVar(&o.sessionGrace, "session-grace", cli.EnvDuration("JOBS_SESSION_GRACE", time.Second),
		"how long after a worker's session connection drops (a killed worker) its claims are released, unless it comes back [$JOBS_SESSION_GRACE]")
	f.StringVar(&o.logLevel, "log-level", cli.Env("JOBS_LOG_LEVEL", "info"), "debug, info, warn or error [$JOBS_LOG_LEVEL]")
	f.StringVar(&o.logFormat, "log-format", cli.Env("JOBS_LOG_FORMAT", "text"), "text or json [$JOBS_LOG_FORMAT]")
	f.StringVar(&o.workerToken, "worker-token", cli.Env("JOBS_WORKER_TOKEN", ""), "token of workers: the worker protocol only [$JOBS_WORKER_TOKEN]")
	f.StringVar(&o.operatorToken, "operator-token", cli.Env("JOBS_OPERATOR_TOKEN", ""), "token of operators: read, enqueue, publish, cancel, retry [$JOBS_OPERATOR_TOKEN]")
	f.StringVar(&o.viewerToken, "viewer-token", cli.Env("JOBS_VIEWER_TOKEN", ""), "token of viewers: read only [$JOBS_VIEWER_TOKEN]")
	f.StringArrayVar(&o.credentials, "credential", nil, "a token with a role, optionally scoped to a tenant: role=token or role@tenant=token (repeatable)")
	f.BoolVar(&o.allowUnauthenticated, "allow-unauthenticated", false,
		"serve beyond loopback without any token (refused otherwise)")
	f.BoolVar(&o.allowUndeclared, "allow-undeclared", cli.EnvBool(envAllowUndecl, false),
		"accept enqueues of jobs no worker has declared yet (they wait, and say why) [$JOBS_ALLOW_UNDECLARED=true]")
	f.BoolVar(&o.noScheduler, "no-scheduler", cli.EnvBool(envNoScheduler, false),
		"do not run the cron scheduler in this process [$JOBS_NO_SCHEDULER=true]")
	f.BoolVar(&o.logRuns, "log-runs", cli.EnvBool(envLogRuns, true),
		"log one info line per finished run (jobs.run.finished: job, state, attempt, duration); --log-runs=false for none [$JOBS_LOG_RUNS=false]")
	o.retention.flags(cmd)
}

// serve runs the engine and its API until SIGTERM. The fx graph is store → engine → API, so the
// drain runs API (stop accepting, finish requests) → engine (finish queued commits, stop timers)
// → store (close).
func serve(cmd *cobra.Command, o *serveOptions) error {
	if o.maxBody <= 0 {
		return cli.Usage("--max-body must be positive, got %d", o.maxBody)
	}
	if err := cli.CheckEnvDurations("JOBS_DRAIN_TIMEOUT", "JOBS_LEASE", "JOBS_SESSION_GRACE"); err != nil {
		return err
	}
	// A boolean read from the environment as a boolean: JOBS_NO_SCHEDULER=false runs the
	// scheduler, and a value that is not a boolean is refused rather than read as either.
	if err := cli.CheckEnvBools(envNoScheduler, envAllowUndecl, envLogRuns); err != nil {
		return err
	}
	if o.drainTimeout <= 0 {
		// Every shutdown would then fail its drain at once, leaving requests and commits cut.
		return cli.Usage("--drain-timeout must be positive, got %s", o.drainTimeout)
	}
	if o.lease < frontend.MinLease || o.sessionGrace <= 0 {
		return cli.Usage("--lease must be at least %s and --session-grace positive, got %s and %s", frontend.MinLease, o.lease, o.sessionGrace)
	}
	if _, err := o.db.postgres(); err != nil {
		return err
	}
	retention, err := o.retention.config()
	if err != nil {
		return err
	}
	if err := o.db.check(cmd); err != nil {
		return err
	}
	log, err := cli.Logger(cmd.ErrOrStderr(), o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	var creds []api.Credential
	for _, rt := range []struct {
		role  api.Role
		token string
	}{{api.RoleWorker, o.workerToken}, {api.RoleOperator, o.operatorToken}, {api.RoleViewer, o.viewerToken}} {
		if rt.token != "" {
			creds = append(creds, api.Credential{Token: rt.token, Role: rt.role})
		}
	}
	for _, s := range o.credentials {
		c, err := api.ParseCredential(s)
		if err != nil {
			return cli.Usage("--credential: %s", strings.TrimPrefix(err.Error(), string(jobs.CodeBadRequest)+": "))
		}
		creds = append(creds, c)
	}
	apiCfg := api.Config{Addr: o.addr, Token: o.token, Credentials: creds, AllowUnauthenticated: o.allowUnauthenticated,
		MaxBody: o.maxBody}
	// The server's own rule (one token in two roles, a token no client can send), applied now:
	// found as the app starts, it would come after the database was created and migrated.
	if err := apiCfg.CheckCredentials(); err != nil {
		return cli.Usage("--token, --worker-token, --operator-token, --viewer-token, --credential: %s",
			strings.TrimPrefix(err.Error(), string(jobs.CodeBadRequest)+": "))
	}
	if o.token == "" && len(creds) == 0 && !api.LoopbackAddr(o.addr) && !o.allowUnauthenticated {
		return cli.Usage("--addr %s is reachable beyond this machine and no token is set: set --token (or role tokens), or pass --allow-unauthenticated", o.addr)
	}
	// Last, once every flag was accepted: a refused serve creates nothing.
	if retention.Archive, err = o.retention.openArchive(); err != nil {
		return err
	}
	log.Info("jobs.engine.starting", "store", o.db.describe(), "addr", o.addr, "lease", o.lease, "scheduler", !o.noScheduler)
	app := fx.New(
		cli.FxLogger(log),
		fx.Supply(log),
		fx.Provide(fx.Annotate(metricsRegistry, fx.As(new(prometheus.Registerer)), fx.As(new(prometheus.Gatherer)))),
		schedulerOption(o.noScheduler),
		fx.Provide(func(lc fx.Lifecycle) (store.Store, error) {
			st, err := o.db.open(cmd.Context(), log)
			if err != nil {
				return nil, err
			}
			lc.Append(fx.StopHook(st.Close))
			return st, nil
		}),
		fx.Supply(engine.Config{Lease: o.lease, SessionGrace: o.sessionGrace, AllowUndeclared: o.allowUndeclared, LogRuns: o.logRuns,
			Retention: retention}),
		engine.Module,
		fx.Supply(apiCfg),
		api.Module,
	)
	return cli.Serve(cmd.Context(), app, log, time.Minute, o.drainTimeout)
}

func newMigrateCmd() *cobra.Command {
	var o dbOptions
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or update the database schema, then exit",
		Long: "Applies the embedded migrations the database has not applied yet. On Postgres this is a\n" +
			"deploy step (it takes an advisory lock, so replicas migrating at once apply each migration\n" +
			"once); SQLite migrates on open as well.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(cmd); err != nil {
				return err
			}
			n, err := o.migrate(cmd.Context())
			if err != nil {
				return err
			}
			if n == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s is already up to date\n", o.describe())
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "migrated %s (%d migrations applied)\n", o.describe(), n)
			}
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}
