package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startWorker runs the worker binary against server with its metrics listener on a free port,
// and returns that listener's base URL; the worker drains when the test ends.
func startWorker(t *testing.T, server string) string {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr testenv.LogBuffer
	go func() {
		done <- run(ctx, []string{"--server", server, "--token", "t", "--poll-wait", "200ms", "--metrics-addr", addr},
			&bytes.Buffer{}, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("the worker did not drain:\n%s", stderr.String())
		}
	})
	return "http://" + addr
}

// get polls url until answer accepts its status and body, or 15s pass.
func get(t *testing.T, url string, accept func(int, string) bool) (int, string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if accept(res.StatusCode, string(body)) || time.Now().After(deadline) {
				return res.StatusCode, string(body)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// /readyz answers 200 once the worker polls the engine, and 503 with the reason while it cannot.
func TestReadyz(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Drain)

	healthy := startWorker(t, ts.URL)
	if st, body := get(t, healthy+"/readyz", func(st int, _ string) bool { return st == 200 }); st != 200 || body != "ready\n" {
		t.Errorf("a polling worker's /readyz: %d %q", st, body)
	}
	if _, body := get(t, healthy+"/metrics", func(int, string) bool { return true }); !strings.Contains(body, `source="worker"`) &&
		!strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %.300s", body)
	}

	orphan := startWorker(t, "http://"+freeAddr(t)) // no engine there
	st, body := get(t, orphan+"/readyz", func(st int, _ string) bool { return st == 503 })
	if st != 503 || !strings.Contains(body, "X_ENGINE_UNREACHABLE") {
		t.Errorf("a worker that cannot reach the engine: /readyz %d %q", st, body)
	}
	if st, _ := get(t, orphan+"/healthz", func(int, string) bool { return true }); st != 200 {
		t.Errorf("/healthz %d: the process is up", st)
	}
}
