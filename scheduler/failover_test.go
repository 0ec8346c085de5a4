package scheduler_test

// Two engine processes on one Postgres, each running a scheduler, the leader SIGKILLed again and
// again: every occurrence of a schedule firing every second is fired exactly once, none missed.
// The test binary is its own child: with JOBS_SCHED_CHILD set, TestMain runs an engine, a worker
// and a scheduler until it is killed.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/worker"
)

func TestMain(m *testing.M) {
	if os.Getenv("JOBS_SCHED_CHILD") != "" {
		failoverChild()
		return
	}
	os.Exit(m.Run())
}

// secondly fires every second; run-all with a wide cap, so the occurrences of a failover's gap
// are caught up, not dropped.
func secondly() scheduler.Schedule {
	return scheduler.MustDefine("secondly", pingJob, "@every 1s", "UTC", Ping{Note: "s"},
		scheduler.CatchUp(scheduler.RunAll), scheduler.MaxCatchUp(1000))
}

// failoverChild runs until SIGKILL. Its worker completes each run at once, so an occurrence fired
// twice would find its idempotency key free and show as a second run.
func failoverChild() {
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.Config{URL: os.Getenv("SCHED_PG_URL"), Schema: os.Getenv("SCHED_PG_SCHEMA"), MaxConns: 4})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	eng, err := engine.New(engine.Config{Store: st, PollFallback: 50 * time.Millisecond, Logger: testenv.Logger()})
	if err != nil {
		os.Exit(3)
	}
	_ = eng.Start(ctx)
	reg, _ := jobs.NewRegistry(pingJob)
	w, _ := worker.New(worker.Config{Frontend: eng, Registry: reg, PollWait: time.Second, Logger: testenv.Logger()})
	_ = w.Start(ctx)
	s, err := scheduler.New(scheduler.Config{Engine: eng, Schedules: scheduler.Static(secondly()),
		Interval: 100 * time.Millisecond, Lease: time.Second, Logger: testenv.Logger()})
	if err != nil {
		os.Exit(3)
	}
	_ = s.Start(ctx)
	select {} // until SIGKILL
}

func TestTwoProcessesLeaderKilledRepeatedly(t *testing.T) {
	t.Parallel()
	url, schema := testenv.FreshSchema(t)
	env := []string{"JOBS_SCHED_CHILD=1", "SCHED_PG_URL=" + url, "SCHED_PG_SCHEMA=" + schema}
	children := map[int]*exec.Cmd{}
	spawn := func() {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[cmd.Process.Pid] = cmd
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	q := func(sql string) string { return strings.ReplaceAll(sql, "{S}", pgx.Identifier{schema}.Sanitize()) }
	// leaderPid is the pid of the child holding the lease; 0 while none holds it.
	leaderPid := func() int {
		var holder string
		var until time.Time
		err := conn.QueryRow(ctx, q(`SELECT holder, until FROM {S}.leaders WHERE role = 'scheduler'`)).Scan(&holder, &until)
		if err != nil || !until.After(time.Now()) {
			return 0
		}
		parts := strings.Split(holder, "-") // host-pid-random; the host may hold dashes
		pid, _ := strconv.Atoi(parts[len(parts)-2])
		if children[pid] == nil {
			return 0
		}
		return pid
	}
	fired := func() int {
		var n int
		// Before the first child migrated the schema there is no table: that is 0 fired.
		_ = conn.QueryRow(ctx, q(`SELECT count(*) FROM {S}.runs WHERE job = 'ping'`)).Scan(&n)
		return n
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	spawn()
	spawn()
	const kills = 4
	for i := 0; i < kills; i++ {
		var pid int
		wait("a leader", func() bool { pid = leaderPid(); return pid != 0 })
		before := fired()
		wait("the leader to fire", func() bool { return fired() >= before+2 })
		cmd := children[pid]
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		delete(children, pid)
		spawn()
	}
	wait("a last leader", func() bool { return leaderPid() != 0 })
	before := fired()
	wait("the last leader to fire", func() bool { return fired() >= before+2 })
	for pid, cmd := range children { // stop firing before reading
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		delete(children, pid)
	}

	rows, err := conn.Query(ctx, q(`SELECT key FROM {S}.runs WHERE job = 'ping' ORDER BY key`))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var watermark time.Time
	if err := conn.QueryRow(ctx, q(`SELECT watermark FROM {S}.schedules WHERE name = 'secondly'`)).Scan(&watermark); err != nil {
		t.Fatal(err)
	}
	if len(keys) < 2*(kills+1) {
		t.Fatalf("only %d occurrences fired", len(keys))
	}
	if dup := slices.Compact(slices.Clone(keys)); len(dup) != len(keys) {
		t.Errorf("%d runs for %d occurrences: an occurrence fired twice", len(keys), len(dup))
	}
	// Every second from the first occurrence to the watermark fired: none missed.
	first, err := time.Parse(time.RFC3339, strings.TrimPrefix(keys[0], "secondly@"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for o := first; !o.After(watermark); o = o.Add(time.Second) {
		want = append(want, scheduler.OccurrenceKey("secondly", o))
	}
	if !slices.Equal(keys, want) {
		t.Errorf("fired %d occurrences from %s to the watermark %s, want the %d seconds between:\n got %v\nwant %v",
			len(keys), keys[0], watermark.UTC().Format(time.RFC3339), len(want), keys, want)
	}
	t.Logf("%d occurrences over %d leader kills, each fired once", len(keys), kills)
}
