package systems

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/monoprocess"
	"github.com/cschleiden/go-workflows/backend/postgres"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
	"github.com/jackc/pgx/v5"
)

// go-workflows gained its Postgres backend in v1.4.0; it is the primary row. The SQLite backend
// (one connection, so single-writer and single-core bound) is kept as a labelled second row since
// it is the closest peer to an embedded store. Both are wrapped in the monoprocess backend, as the
// project's own benchmark does, so the in-process worker is woken on new tasks instead of polling.
func init() {
	Register("goworkflows_pg", func() System { return &goWorkflowsSystem{kind: "postgres"} })
	Register("goworkflows_sqlite", func() System { return &goWorkflowsSystem{kind: "sqlite"} })
}

type goWorkflowsSystem struct {
	kind string // "postgres" or "sqlite"

	backend backend.Backend
	worker  *worker.Worker
	client  *client.Client
	stop    context.CancelFunc
}

func (s *goWorkflowsSystem) Name() string {
	if s.kind == "sqlite" {
		return "go-workflows (SQLite backend, monoprocess)"
	}
	return "go-workflows (Postgres backend, monoprocess)"
}

func (s *goWorkflowsSystem) Module() string { return "github.com/cschleiden/go-workflows" }

func (s *goWorkflowsSystem) Skip(scenario string) string {
	if scenario == ScenarioNoop {
		return "not measured: go-workflows is compared on multi-step workflows only"
	}
	return ""
}

// gwStep is the no-op activity.
func gwStep(_ context.Context, i int) (int, error) { return i, nil }

// gwTenStep runs ten activities in sequence; each result is recorded in the workflow's history
// before the next is scheduled.
func gwTenStep(ctx workflow.Context) (int, error) {
	n := 0
	for i := range 10 {
		v, err := workflow.ExecuteActivity[int](ctx, workflow.DefaultActivityOptions, gwStep, i).Get(ctx)
		if err != nil {
			return 0, err
		}
		if v == i {
			n++
		}
	}
	return n, nil
}

func (s *goWorkflowsSystem) Setup(ctx context.Context, env Env) (err error) {
	// The library panics on connection and migration errors; turn that into a failed run.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("go-workflows backend: %v", r)
		}
	}()

	bopts := []backend.BackendOption{backend.WithLogger(quietLogger())}
	var b backend.Backend
	switch s.kind {
	case "sqlite":
		b = sqlite.NewSqliteBackend(filepath.Join(env.Dir, "go-workflows.sqlite"), sqlite.WithBackendOptions(bopts...))
	default:
		host, port, user, pass, db, err := splitURL(env.DatabaseURL)
		if err != nil {
			return err
		}
		// Migrations run on a sql.DB of their own that the backend closes before returning.
		// database/sql keeps only two idle connections by default, so with more callers than
		// that it closes and reopens Postgres connections all the time (a backend start-up
		// each). Keeping the whole pool idle makes it the same kind of pool the others get.
		b = postgres.NewPostgresBackend(host, port, user, pass, db,
			postgres.WithBackendOptions(bopts...),
			postgres.WithPostgresOptions(func(db *sql.DB) {
				db.SetMaxOpenConns(env.PoolSize)
				db.SetMaxIdleConns(env.PoolSize)
			}))
		if err := checkTable(ctx, env.DatabaseURL, "instances"); err != nil {
			b.Close()
			return err
		}
	}
	s.backend = monoprocess.NewMonoprocessBackend(b)

	wctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	opts := worker.DefaultOptions // a copy: the worker keeps a pointer to its options
	s.worker = worker.New(s.backend, &opts)
	if err := s.worker.RegisterWorkflow(gwTenStep); err != nil {
		return err
	}
	if err := s.worker.RegisterActivity(gwStep); err != nil {
		return err
	}
	if err := s.worker.Start(wctx); err != nil {
		return err
	}
	s.client = client.New(s.backend)
	return nil
}

func (s *goWorkflowsSystem) NoopJobs(context.Context, int, int) (Result, error) {
	return Result{}, Unsupported(s.Skip(ScenarioNoop))
}

func (s *goWorkflowsSystem) TenStep(ctx context.Context, runs, concurrency int) (Result, error) {
	done, err := ClosedLoop(ctx, runs, concurrency, func(ctx context.Context, i int) error {
		inst, err := s.client.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{
			InstanceID: fmt.Sprintf("run-%d", i),
		}, gwTenStep)
		if err != nil {
			return err
		}
		// GetWorkflowResult is the library's way for a caller to wait: it polls the instance's
		// state with exponential back-off (1 ms growing ×1.5 up to 1 s), which adds latency to
		// each run and therefore bounds a closed loop like this one.
		got, err := client.GetWorkflowResult[int](ctx, s.client, inst, 10*time.Minute)
		if err != nil {
			return err
		}
		if got != 10 {
			return fmt.Errorf("run %d saw %d of 10 steps", i, got)
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	return Result{
		Units:   done,
		Steps:   done * 10,
		Backend: s.kind + " (monoprocess)",
		Note:    "CreateWorkflowInstance+GetWorkflowResult (polls)",
	}, nil
}

func (s *goWorkflowsSystem) Close() error {
	var errs []error
	if s.stop != nil {
		s.stop()
		errs = append(errs, s.worker.WaitForCompletion())
	}
	if s.backend != nil {
		errs = append(errs, s.backend.Close())
	}
	// Cancelling the worker's context is how it is stopped; that is not a failure.
	err := errors.Join(errs...)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// splitURL takes a postgres:// URL apart for NewPostgresBackend, which builds its own key=value
// DSN. An empty password would swallow the next keyword in that DSN (and silently connect to
// the user's default database), so a placeholder is passed when none is set; the throwaway
// cluster uses trust authentication.
func splitURL(raw string) (host string, port int, user, pass, db string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", 0, "", "", "", err
	}
	h, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		h, p = u.Host, "5432"
	}
	port, err = strconv.Atoi(p)
	if err != nil {
		return "", 0, "", "", "", fmt.Errorf("port %q: %w", p, err)
	}
	pass, _ = u.User.Password()
	if pass == "" {
		pass = "unused"
	}
	return h, port, u.User.Username(), pass, strings.TrimPrefix(u.Path, "/"), nil
}

// checkTable confirms the backend's schema landed in the run's own database.
func checkTable(ctx context.Context, dbURL, table string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var found bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&found); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("table %q missing from the run's database after migration", table)
	}
	return nil
}
