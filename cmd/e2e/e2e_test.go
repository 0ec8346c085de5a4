package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/replay"
	"github.com/ultimat3/jobs/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "e2e-token"

// binaries are cmd/engine and cmd/worker, built once per test binary.
type binaries struct{ engine, worker string }

var (
	buildOnce sync.Once
	built     binaries
	buildErr  error
)

// build compiles both commands with `go build`. They are built without -race even under
// `go test -race`: the packages are already compiled without it for `go vet`, so the build is a
// link, and the race detector covers the same code in the in-process tests.
func build(t *testing.T) binaries {
	t.Helper()
	buildOnce.Do(func() {
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			if goBin, err = exec.LookPath("go"); err != nil {
				buildErr = fmt.Errorf("no go command to build the binaries: %w", err)
				return
			}
		}
		dir, err := os.MkdirTemp("", "jobs-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		built = binaries{engine: filepath.Join(dir, "engine"), worker: filepath.Join(dir, "worker")}
		for pkg, out := range map[string]string{"./cmd/engine": built.engine, "./cmd/worker": built.worker} {
			cmd := exec.Command(goBin, "build", "-o", out, pkg)
			cmd.Dir = "../.."
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func TestEndToEnd(t *testing.T) {
	t.Parallel()
	bins := build(t)
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(bins.engine)) })

	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		scenario(t, bins, []string{"JOBS_DATA_DIR=" + t.TempDir()})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url, schema := testenv.FreshSchema(t) // skips without TEST_DATABASE_URL
		db := []string{"DATABASE_URL=" + url, "JOBS_DB_SCHEMA=" + schema}
		r := cli(t, bins, db, "migrate")
		expectExit(t, r, 0, "")
		if !strings.Contains(r.stdout, "postgres") || strings.Contains(r.stdout, "postgres@") {
			t.Fatalf("migrate printed %q", r.stdout)
		}
		scenario(t, bins, db)
	})
}

// scenario runs an engine and a worker on the database that env names, and drives them with the
// CLI: an onboarding through its sleep, its event wait and completion; an order whose payment
// does not come; the refusals an operator meets; then SIGTERM and a clean drain.
func scenario(t *testing.T, bins binaries, db []string) {
	addr := freeAddr(t)
	server := "http://" + addr
	metrics := freeAddr(t)
	eng := start(t, "engine", bins.engine, db, "serve", "--addr", addr, "--token", token)
	waitReady(t, eng, server)
	wrk := start(t, "worker", bins.worker, nil, "--server", server, "--token", token,
		"--onboarding-sleep", "1s", "--payment-timeout", "1s", "--concurrency", "4", "--poll-wait", "2s",
		"--metrics-addr", metrics)
	ops := []string{"JOBS_SERVER=" + server, "JOBS_TOKEN=" + token}

	// The engine refuses jobs no worker has declared: wait for the worker's manifest, as a
	// deploy would wait for its workers to be up.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := cli(t, bins, ops, "manifest", "--json")
		if r.code == 0 && strings.Contains(r.stdout, `"name": "`+examples.OnboardingName+`"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's manifest never reached the engine: %s %s", r.stdout, r.stderr)
		}
	}

	// Enqueue an onboarding by name, as an operator would.
	r := cli(t, bins, ops, "jobs", "enqueue", examples.OnboardingName, "--input", `{"orgId":"e2e","name":"E2E"}`,
		"--key", "onboard:e2e", "--tenant", "e2e", "--json")
	expectExit(t, r, 0, "")
	var enq jobs.EnqueueResult
	if err := json.Unmarshal([]byte(r.stdout), &enq); err != nil || enq.RunID == "" {
		t.Fatalf("enqueue --json printed %q (%v)", r.stdout, err)
	}
	id := enq.RunID

	// It provisions, seeds, sleeps a second, then suspends on its wait for a plan.
	show(t, bins, ops, id, 30*time.Second, func(v engine.RunView) bool {
		n := len(v.Steps)
		return v.State == store.StateSuspended && n == 4 && v.Steps[n-1].Kind == "wait" && v.Steps[n-1].Status == "waiting"
	})
	r = cli(t, bins, ops, "events", "publish", "plan.chosen", "--payload", `{"orgId":"e2e","plan":"pro"}`, "--json")
	expectExit(t, r, 0, "")
	if !strings.Contains(r.stdout, `"delivered": 1`) {
		t.Fatalf("publish printed %q; want it delivered to the waiting run", r.stdout)
	}
	v := show(t, bins, ops, id, 30*time.Second, func(v engine.RunView) bool { return v.State == store.StateCompleted })
	var res examples.OnboardingResult
	if err := json.Unmarshal(v.Result, &res); err != nil || res.Plan != "pro" || res.Welcome != "Welcome to the pro plan, E2E!" {
		t.Fatalf("result %s (%v)", v.Result, err)
	}

	// The human views.
	r = cli(t, bins, ops, "jobs", "show", id)
	expectExit(t, r, 0, "")
	for _, want := range []string{"completed", "look-around", "woke", "plan.chosen", "welcome"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("jobs show printed\n%s\nwithout %q", r.stdout, want)
		}
	}
	r = cli(t, bins, ops, "jobs", "ls")
	expectExit(t, r, 0, "")
	if !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "QUEUE") {
		t.Fatalf("jobs ls printed\n%s", r.stdout)
	}

	// The dump replays against the code the worker ran: the deploy regression test, end to end.
	r = cli(t, bins, ops, "history", "dump", id)
	expectExit(t, r, 0, "")
	events, err := history.Load(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	if err := replay.Check(context.Background(), examples.Onboarding, events); err != nil {
		t.Fatalf("the dumped history does not replay: %v", err)
	}

	// An order whose payment never comes: the reservation is released after the 1s timeout.
	r = cli(t, bins, ops, "jobs", "enqueue", examples.OrderSagaName, "--queue", "orders", "--key", "order:o-1",
		"--tenant", "shop", "--input", `{"orderId":"o-1","shop":"shop","items":[{"sku":"mug","qty":2}],"amount":1200}`, "--json")
	expectExit(t, r, 0, "")
	var order jobs.EnqueueResult
	if err := json.Unmarshal([]byte(r.stdout), &order); err != nil {
		t.Fatal(err)
	}
	v = show(t, bins, ops, order.RunID, 30*time.Second, func(v engine.RunView) bool { return v.State == store.StateCompleted })
	var ores examples.OrderResult
	if err := json.Unmarshal(v.Result, &ores); err != nil || ores.Status != examples.OrderCancelled || !ores.Released {
		t.Fatalf("order result %s (%v)", v.Result, err)
	}

	// The refusals an operator meets, with their codes and exit statuses.
	expectExit(t, cli(t, bins, ops, "jobs", "cancel", id), 1, "X_JOB_NOT_CANCELLABLE: ")
	expectExit(t, cli(t, bins, ops, "jobs", "show", "no-such-run"), 1, "X_RUN_NOT_FOUND: ")
	expectExit(t, cli(t, bins, ops, "jobs", "enqueue", examples.OnboardingName, "--key", "k"), 2, "X_JOB_TENANT_REQUIRED: ")
	expectExit(t, cli(t, bins, []string{"JOBS_SERVER=" + server, "JOBS_TOKEN=wrong"}, "jobs", "ls"), 1, "X_UNAUTHORIZED: ")
	r = cli(t, bins, ops, "jobs", "ls", "--json")
	expectExit(t, r, 0, "")
	var ls struct {
		Queues []engine.QueueView  `json:"queues"`
		Runs   []engine.RunSummary `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil || len(ls.Runs) != 2 || len(ls.Queues) != 2 {
		t.Fatalf("jobs ls --json printed %q (%v)", r.stdout, err)
	}
	r = cli(t, bins, ops, "dead-letters", "--json")
	expectExit(t, r, 0, "")
	r = cli(t, bins, ops, "codes", "--json")
	expectExit(t, r, 0, "")
	if !strings.Contains(r.stdout, "X_JOB_NOT_CANCELLABLE") {
		t.Fatalf("codes --json printed %q", r.stdout)
	}

	// Metrics: the engine's queue gauges (behind the token) and the worker's counters.
	body := get(t, server+"/metrics", token)
	if !strings.Contains(body, `queue_depth{queue="default"} 0`) || !strings.Contains(body, "queue_stats_up 1") {
		t.Fatalf("engine metrics lack the queue gauges:\n%s", body)
	}
	body = get(t, "http://"+metrics+"/metrics", "")
	if !strings.Contains(body, `jobs_total{outcome="completed",queue="default",source="worker"} 1`) ||
		!strings.Contains(body, `jobs_total{outcome="completed",queue="orders",source="worker"} 1`) {
		t.Fatalf("worker metrics lack jobs_total:\n%s", body)
	}

	// SIGTERM drains both: the worker first (it stops claiming and finishes), then the engine.
	wrk.terminate(t, 10*time.Second)
	eng.terminate(t, 10*time.Second)
	if !strings.Contains(eng.logs(), "jobs.stopped") || !strings.Contains(wrk.logs(), "jobs.stopped") {
		t.Fatalf("no clean stop logged\nengine:\n%s\nworker:\n%s", eng.logs(), wrk.logs())
	}
}

// proc is a running binary.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *testenv.LogBuffer
	done chan struct{}
	err  error
}

func start(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &testenv.LogBuffer{}, done: make(chan struct{})}
	p.cmd.Env = cleanEnv(env)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, p.logs())
		}
	})
	return p
}

func (p *proc) logs() string { return p.out.String() }

// terminate sends SIGTERM and requires exit status 0 within limit.
func (p *proc) terminate(t *testing.T, limit time.Duration) {
	t.Helper()
	began := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("%s did not exit within %s of SIGTERM", p.name, limit)
	}
	if p.err != nil {
		t.Fatalf("%s exited with %v after SIGTERM, want 0", p.name, p.err)
	}
	t.Logf("%s drained and exited 0 in %s", p.name, time.Since(began).Round(time.Millisecond))
}

// cleanEnv is this process's environment without the variables the binaries read, plus extra:
// a developer's JOBS_TOKEN or DATABASE_URL must not leak into the test.
func cleanEnv(extra []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "JOBS_") || strings.HasPrefix(kv, "DATABASE_URL=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the engine binary as an operator's command.
func cli(t *testing.T, bins binaries, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.engine, args...)
	cmd.Env = cleanEnv(env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("engine %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return result{code, out.String(), errb.String()}
}

func expectExit(t *testing.T, r result, code int, stderrPrefix string) {
	t.Helper()
	if r.code != code || !strings.HasPrefix(r.stderr, stderrPrefix) {
		t.Fatalf("exit %d, stderr %q; want exit %d and stderr starting %q\nstdout: %s", r.code, r.stderr, code, stderrPrefix, r.stdout)
	}
}

// show polls `engine jobs show ID --json` until cond holds.
func show(t *testing.T, bins binaries, env []string, id string, limit time.Duration, cond func(engine.RunView) bool) engine.RunView {
	t.Helper()
	var v engine.RunView
	deadline := time.Now().Add(limit)
	for {
		r := cli(t, bins, env, "jobs", "show", id, "--json")
		expectExit(t, r, 0, "")
		v = engine.RunView{}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("jobs show --json printed %q: %v", r.stdout, err)
		}
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not there after %s: %s", id, limit, r.stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitReady(t *testing.T, p *proc, server string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("%s exited before it was ready (%v)", p.name, p.err)
		default:
		}
		res, err := http.Get(server + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not ready after 30s", p.name)
}

func get(t *testing.T, url, bearer string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s (%v)", url, res.StatusCode, b, err)
	}
	return string(b)
}

// freeAddr returns a loopback address with a port the kernel just handed out.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
