package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/mcp"
	"github.com/ultimat3/jobs/store"
)

// failingStore fails QueueStats, once given an error, with that error: one carrying no X_ code,
// as a custom store.Store or a database driver returns.
type failingStore struct {
	store.Store
	fail *atomic.Pointer[error]
}

func (s failingStore) QueueStats(ctx context.Context) ([]store.QueueStats, error) {
	if err := s.fail.Load(); err != nil {
		return nil, *err
	}
	return s.Store.QueueStats(ctx)
}

// A driver's message may name hosts, users and credentials.
const driverSecret = "hunter2"

// A tool refuses an error without an X_ code exactly as the HTTP API does (one rule,
// internal/refuse): not its text but "internal error; the engine logged it", logged for the
// operator; and a store's deadline as X_STORE_UNAVAILABLE, which a caller may retry. /mcp is
// served to the same credentials as GET /v1/queues, so a viewer may not read there what the
// API does not show it.
func TestToolRefusesUncodedErrorsAsTheAPIDoes(t *testing.T) {
	t.Parallel()
	fail := &atomic.Pointer[error]{}
	o := testenv.StartOps(t, failingStore{Store: testenv.Backends()[0].Open(t), fail: fail})
	base := serveAPI(t, o)
	viewer, err := connectHTTP(context.Background(), base, "viewer-t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = viewer.Close() })
	var logs testenv.LogBuffer
	local := connectInMemory(t, mcp.NewServer(client.Local(o.Engine, sched(t, o)), mcp.Options{Logger: logs.Logger()}))

	for _, tc := range []struct {
		name string
		err  error
		code jobs.Code
	}{
		{"a driver's error", errors.New("pq: password authentication failed for user \"jobs\" at 10.0.0.5 (" + driverSecret + ")"), jobs.CodeInternal},
		{"a store's deadline", fmt.Errorf("query queue stats: %w", context.DeadlineExceeded), jobs.CodeStoreUnavailable},
	} {
		fail.Store(&tc.err)
		req, err := http.NewRequest(http.MethodGet, base+"/v1/queues", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer viewer-t")
		hr, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(hr.Body)
		hr.Body.Close()
		var want api.ErrorBody
		if err := json.Unmarshal(body, &want); err != nil || want.Error == nil || want.Error.Code != tc.code {
			t.Fatalf("%s: GET /v1/queues answered %s; want %s", tc.name, body, tc.code)
		}
		for via, cs := range map[string]*sdk.ClientSession{"/mcp": viewer, "in memory": local} {
			res := call(t, cs, mcp.ToolListQueues, map[string]any{})
			refused(t, res, tc.code)
			var got mcp.ErrorBody
			if err := json.Unmarshal([]byte(text(res)), &got); err != nil || got.Error.Message != want.Error.Message {
				t.Fatalf("%s: list_queues %s answered %s; GET /v1/queues answers %s", tc.name, via, text(res), body)
			}
			if strings.Contains(text(res), driverSecret) {
				t.Fatalf("%s: list_queues %s echoes the store's own text: %s", tc.name, via, text(res))
			}
		}
	}
	// The text the caller is not shown is the operator's, in the log, with the tool that met it.
	if l := logs.String(); !strings.Contains(l, "jobs.mcp.internal") || !strings.Contains(l, driverSecret) || !strings.Contains(l, "tool="+mcp.ToolListQueues) {
		t.Fatalf("the driver's error is not logged with its tool: %q", l)
	}
}
