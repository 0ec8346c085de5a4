package host_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/host"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

type invoice struct {
	ID string `json:"id"`
}

// An application's own job, unknown to the examples and the reference worker.
var sendInvoice = jobs.MustDefine("send-invoice",
	func(in invoice) string { return in.ID }, jobs.NoTenant[invoice](),
	func(ctx *jobs.Ctx, in invoice) (string, error) {
		return jobs.Step(ctx, "render", func(context.Context) (string, error) { return "pdf:" + in.ID, nil })
	}, jobs.Queue("billing"))

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// A user registry hosted against a real api.Server: the run completes, /readyz says ready and
// /metrics counts it; after Run returns (ctx cancelled) the listener is gone.
func TestRunRemote(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}, RequireDeclared: true})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)

	reg, err := jobs.NewRegistry(sendInvoice)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err := host.Start(ctx, host.Options{Engine: ts.URL, Token: "t", Registry: reg, Logger: env.Logger,
		MetricsAddr: "127.0.0.1:0", Worker: worker.Config{PollWait: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()

	// The engine requires declarations: the enqueue is accepted only once the hosted worker
	// declared send-invoice.
	var run jobs.EnqueueResult
	deadline := time.Now().Add(10 * time.Second)
	for {
		run, err = sendInvoice.Enqueue(ctx, env.Engine, invoice{ID: "inv-1"})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	done := env.Await(run.RunID, store.StateCompleted)
	if out, err := sendInvoice.Result(done.Result); err != nil || out != "pdf:inv-1" {
		t.Fatalf("result %q, %v", out, err)
	}
	base := "http://" + h.MetricsAddr()
	if st, body := get(t, base+"/readyz"); st != 200 || body != "ready\n" {
		t.Errorf("/readyz %d %q", st, body)
	}
	// The worker counts the run just after its completion landed: poll briefly.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, body := get(t, base+"/metrics")
		ok := st == 200 && strings.Contains(body, `jobs_total{`) && strings.Contains(body, "go_goroutines")
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics %d without jobs_total: %.400s", st, body)
		}
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the metrics listener still answers after Stop")
	}
}

// In-process: Run with the engine as Frontend returns nil once ctx ends, after the run finished.
func TestRunInProcess(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	reg, err := jobs.NewRegistry(sendInvoice)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- host.Run(ctx, host.Options{Frontend: env.Engine, Registry: reg, Logger: env.Logger, NoSignals: true,
			Worker: worker.Config{PollWait: 200 * time.Millisecond}})
	}()
	run, err := sendInvoice.Enqueue(ctx, env.Engine, invoice{ID: "inv-2"})
	if err != nil {
		t.Fatal(err)
	}
	env.Await(run.RunID, store.StateCompleted)
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// Bad options are refused before anything starts, with X_BAD_REQUEST.
func TestStartRefusesBadOptions(t *testing.T) {
	t.Parallel()
	reg, _ := jobs.NewRegistry(sendInvoice)
	for name, o := range map[string]host.Options{
		"no registry":    {Engine: "http://127.0.0.1:1"},
		"no engine":      {Registry: reg},
		"both engines":   {Registry: reg, Engine: "http://127.0.0.1:1", Frontend: memoryEngine(t)},
		"bad engine URL": {Registry: reg, Engine: "ftp://x"},
		"bad token":      {Registry: reg, Engine: "http://127.0.0.1:1", Token: "t\n"},
	} {
		_, err := host.Start(context.Background(), o)
		if jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("%s: %v, want X_BAD_REQUEST", name, err)
		}
	}
}

// A metrics address Start cannot listen on (taken, or not one) fails it with X_LISTEN_FAILED, the
// code the engine gives its own failed listen.
func TestStartReportsAFailedMetricsListen(t *testing.T) {
	t.Parallel()
	reg, _ := jobs.NewRegistry(sendInvoice)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, addr := range []string{taken.Addr().String(), "256.0.0.1:bad"} {
		h, err := host.Start(context.Background(), host.Options{Registry: reg, Engine: "http://127.0.0.1:1", MetricsAddr: addr})
		if err == nil {
			_ = h.Stop(context.Background())
		}
		if jobs.CodeOf(err) != jobs.CodeListenFailed {
			t.Errorf("MetricsAddr %s: %v, want X_LISTEN_FAILED", addr, err)
		}
	}
}

func memoryEngine(t *testing.T) *engine.Engine {
	return testenv.Start(t, testenv.Options{Store: memory.New()}).Engine
}

// The worker logs one readable line per claim at info (outcome and duration); QuietRuns drops it.
func TestOneLinePerRun(t *testing.T) {
	t.Parallel()
	for _, quiet := range []bool{false, true} {
		env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
		var logs testenv.LogBuffer
		reg, _ := jobs.NewRegistry(sendInvoice)
		h, err := host.Start(context.Background(), host.Options{Frontend: env.Engine, Registry: reg, Logger: logs.Logger(),
			Worker: worker.Config{PollWait: 200 * time.Millisecond, QuietRuns: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		run, err := sendInvoice.Enqueue(context.Background(), env.Engine, invoice{ID: "inv-log"})
		if err != nil {
			t.Fatal(err)
		}
		env.Await(run.RunID, store.StateCompleted)
		if err := h.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		line := "msg=jobs.run worker="
		has := strings.Contains(logs.String(), line) && strings.Contains(logs.String(), "run="+run.RunID+" job=send-invoice attempt=1 outcome=completed took=")
		if has == quiet {
			t.Errorf("quiet=%v, logged:\n%s", quiet, logs.String())
		}
	}
}
