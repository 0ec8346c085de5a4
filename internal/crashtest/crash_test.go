// Package crashtest kills the engine and its worker with SIGKILL in the middle of a run and
// restarts them, on SQLite and on Postgres, to show what survives: every step that completed ran
// exactly once, the step in flight ran at most twice, and the run completes.
//
// The test binary is its own child: with JOBS_CRASH_CHILD set, TestMain runs an engine and a
// worker over the store named in the environment until it is killed.
package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/store/sqlite"
	"github.com/ultimat3/jobs/worker"
)

const steps = 5

// fiveSteps appends "stepN" to the effects file (fsynced) each time a step's function runs, then
// lingers, so a kill lands while the step is in flight: its effect done, its result unrecorded.
func fiveSteps(effects string) *jobs.Job[int, int] {
	return jobs.MustDefine("crash-five", func(int) string { return "crash" }, jobs.NoTenant[int](),
		func(c *jobs.Ctx, in int) (int, error) {
			for i := 1; i <= steps; i++ {
				name := fmt.Sprintf("step%d", i)
				if _, err := jobs.Step(c, name, func(context.Context) (int, error) {
					if err := appendLine(effects, name); err != nil {
						return 0, err
					}
					time.Sleep(150 * time.Millisecond)
					return i, nil
				}); err != nil {
					return 0, err
				}
			}
			return steps, nil
		})
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return err
	}
	return f.Sync()
}

func TestMain(m *testing.M) {
	if os.Getenv("JOBS_CRASH_CHILD") != "" {
		child()
		return
	}
	os.Exit(m.Run())
}

func openStore(ctx context.Context) (store.Store, error) {
	if url := os.Getenv("CRASH_PG_URL"); url != "" {
		return postgres.Open(ctx, postgres.Config{URL: url, Schema: os.Getenv("CRASH_PG_SCHEMA"), MaxConns: 4})
	}
	return sqlite.Open(ctx, sqlite.Config{Path: os.Getenv("CRASH_SQLITE")})
}

// child runs an engine and a worker until it is killed.
func child() {
	ctx := context.Background()
	st, err := openStore(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	// A short lease, so a restarted engine reclaims the killed one's run quickly.
	eng, err := engine.New(engine.Config{Store: st, Lease: time.Second, PollFallback: 50 * time.Millisecond, Logger: testenv.Logger()})
	if err != nil {
		os.Exit(3)
	}
	_ = eng.Start(ctx)
	reg, _ := jobs.NewRegistry(fiveSteps(os.Getenv("CRASH_EFFECTS")))
	w, _ := worker.New(worker.Config{Frontend: eng, Registry: reg, PollWait: time.Second, Logger: testenv.Logger()})
	_ = w.Start(ctx)
	if os.Getenv("CRASH_ENQUEUE") != "" {
		req, _ := fiveSteps("").Request(1)
		if _, err := eng.Enqueue(ctx, req); err != nil {
			fmt.Fprintln(os.Stderr, "child enqueue:", err)
			os.Exit(3)
		}
	}
	select {} // until SIGKILL
}

func startChild(t *testing.T, env []string, enqueue bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "JOBS_CRASH_CHILD=1")
	if enqueue {
		cmd.Env = append(cmd.Env, "CRASH_ENQUEUE=1")
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func effects(t *testing.T, path string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return counts
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		counts[strings.TrimSpace(sc.Text())]++
	}
	return counts
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSIGKILLMidRun(t *testing.T) {
	backends := map[string]func(t *testing.T) ([]string, store.Store){
		"sqlite": func(t *testing.T) ([]string, store.Store) {
			path := filepath.Join(t.TempDir(), "jobs.db")
			return []string{"CRASH_SQLITE=" + path}, nil
		},
		"postgres": func(t *testing.T) ([]string, store.Store) {
			url, schema := testenv.FreshSchema(t)
			return []string{"CRASH_PG_URL=" + url, "CRASH_PG_SCHEMA=" + schema}, nil
		},
	}
	for name, setup := range backends {
		t.Run(name, func(t *testing.T) {
			env, _ := setup(t)
			effectsPath := filepath.Join(t.TempDir(), "effects.log")
			env = append(env, "CRASH_EFFECTS="+effectsPath)

			// Kill during step 3 (its effect done, its result not yet recorded), then during
			// step 4 of the restarted process, then let a third one finish.
			first := startChild(t, env, true)
			waitFor(t, "step3 to start", func() bool { return effects(t, effectsPath)["step3"] == 1 })
			kill(t, first)
			second := startChild(t, env, false)
			waitFor(t, "step4 to start", func() bool { return effects(t, effectsPath)["step4"] == 1 })
			kill(t, second)
			startChild(t, env, false)
			waitFor(t, "step5 to run", func() bool { return effects(t, effectsPath)["step5"] >= 1 })

			// Read the outcome through a store of our own (the child still runs).
			os.Setenv("CRASH_SQLITE", valueOf(env, "CRASH_SQLITE"))
			ctx := context.Background()
			var st store.Store
			var err error
			if url := valueOf(env, "CRASH_PG_URL"); url != "" {
				st, err = postgres.Open(ctx, postgres.Config{URL: url, Schema: valueOf(env, "CRASH_PG_SCHEMA"), MaxConns: 2})
			} else {
				st, err = sqlite.Open(ctx, sqlite.Config{Path: valueOf(env, "CRASH_SQLITE"), ReadOnly: true})
			}
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var run store.Run
			waitFor(t, "the run to complete", func() bool {
				runs, err := st.RunList(ctx, store.ListParams{Job: "crash-five"})
				if err != nil || len(runs) != 1 {
					return false
				}
				run = runs[0]
				return run.State == store.StateCompleted
			})
			events, err := st.HistoryRead(ctx, run.ID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			recorded := map[string]int{}
			for _, ev := range events {
				if ev.Kind == history.KindStepCompleted {
					recorded[ev.Name]++
				}
			}
			got := effects(t, effectsPath)
			for i := 1; i <= steps; i++ {
				name := fmt.Sprintf("step%d", i)
				if recorded[name] != 1 {
					t.Errorf("%s recorded %d times", name, recorded[name])
				}
				want := 1
				if i == 3 || i == 4 { // in flight at a kill: at most twice
					want = 2
				}
				if got[name] < 1 || got[name] > want {
					t.Errorf("%s ran %d times, want 1..%d", name, got[name], want)
				}
			}
			t.Logf("effects per step: %v", got)
		})
	}
}

func valueOf(env []string, key string) string {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return strings.TrimPrefix(kv, key+"=")
		}
	}
	return ""
}
