package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/store"
)

type bulkIn struct {
	ID string `msgpack:"id" json:"id"`
}

var bulkJob = jobs.MustDefine("bulk-note", func(in bulkIn) string { return in.ID }, jobs.NoTenant[bulkIn](),
	func(_ *jobs.Ctx, in bulkIn) (string, error) { return in.ID, nil })

// The Go client's bulk enqueue (msgpack): one call, every item answered in order, idempotency
// per item (a live run's key and a key repeated in the call both come back Deduped), and the
// runs complete on a remote worker.
func TestBulkEnqueueOverTheClient(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	first, err := bulkJob.Enqueue(t.Context(), b.client, bulkIn{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	items, err := bulkJob.EnqueueMany(t.Context(), b.client, []bulkIn{{"a"}, {"b"}, {"c"}, {"b"}, {""}})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 5 {
		t.Fatalf("%d items, want 5", len(items))
	}
	if it := items[0]; !it.Deduped || it.RunID != first.RunID || it.Error != nil {
		t.Errorf("item a: %+v; want the live run %s, deduped", it, first.RunID)
	}
	for _, i := range []int{1, 2} {
		if it := items[i]; it.Deduped || it.RunID == "" || it.Error != nil {
			t.Errorf("item %d: %+v; want a new run", i, it)
		}
	}
	if it := items[3]; !it.Deduped || it.RunID != items[1].RunID {
		t.Errorf("the repeated key: %+v; want the first item's run %s, deduped", it, items[1].RunID)
	}
	if it := items[4]; it.Error == nil || it.Error.Code != jobs.CodeJobIdempotencyRequired || it.RunID != "" {
		t.Errorf("the item with an empty key: %+v; want X_JOB_IDEMPOTENCY_REQUIRED", it)
	}
	b.remoteWorker(t, bulkJob)
	for _, id := range []string{first.RunID, items[1].RunID, items[2].RunID} {
		b.env.Await(id, store.StateCompleted)
	}
	runs, err := b.env.Store.RunList(t.Context(), store.ListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Errorf("%d runs stored, want 3 (a, b, c)", len(runs))
	}
}

// The JSON admin API: a refused item (no key, another tenant's, a key over 1,000 bytes, a dedupe id) is answered
// in its place and writes nothing; the others are created; a body over MaxBody writes nothing.
func TestBulkEnqueueJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "admin", Credentials: []api.Credential{
		{Token: "acme-op", Role: api.RoleOperator, Tenant: "acme"}}})
	body := []byte(`{"items":[
		{"job":"bulk-note","key":"k1","tenant":"acme","input":{"id":"k1"}},
		{"job":"bulk-note","tenant":"acme"},
		{"job":"bulk-note","key":"k3","tenant":"other"},
		{"job":"bulk-note","key":"` + strings.Repeat("k", 1001) + `","tenant":"acme"},
		{"job":"bulk-note","key":"k5","tenant":"acme","dedupeId":"d5"}]}`)
	status, _, raw := b.call(t, http.MethodPost, "/v1/runs/bulk", "application/json", "acme-op", body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	var resp api.BulkEnqueueResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Items) != 5 {
		t.Fatalf("%d items, want 5: %s", len(resp.Items), raw)
	}
	if it := resp.Items[0]; it.RunID == "" || it.Error != nil {
		t.Errorf("item 0: %+v; want a run", it)
	}
	for i, want := range map[int]jobs.Code{1: jobs.CodeJobIdempotencyRequired, 2: jobs.CodeForbidden,
		3: jobs.CodeBadRequest, 4: jobs.CodeBadRequest} {
		if it := resp.Items[i]; it.Error == nil || it.RunID != "" || it.Error.Code != want {
			t.Errorf("item %d: %+v; want refused with %s", i, it, want)
		}
	}
	runs, err := b.env.Store.RunList(t.Context(), store.ListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != resp.Items[0].RunID || runs[0].Tenant != "acme" {
		t.Errorf("stored %+v; want only item 0's run", runs)
	}

	// A viewer may not enqueue; a body over the limit is refused whole.
	small := setup(t, api.Config{MaxBody: 256})
	big, _ := json.Marshal(api.BulkEnqueueBody{Items: make([]api.EnqueueBody, 20)})
	status, _, raw = small.call(t, http.MethodPost, "/v1/runs/bulk", "application/json", "", big)
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over MaxBody: status %d (%s), want 413", status, raw)
	}
}

// Each item of a JSON bulk enqueue is the enqueue POST /v1/runs would make of the same body:
// the same run (priority, delay, queue, actor, input, the caller's trace) when it is accepted,
// the same code when it is refused. The bulk path once dropped the priority, and so also let
// an out-of-range one through.
func TestBulkEnqueueJSONItemIsASingleEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	post := func(path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", traceparent)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, out
	}
	// %s is the key: the single enqueue and the bulk item each get their own.
	for _, item := range []string{
		`{"job":"bulk-note","key":"%s","noTenant":true,"priority":7,"input":{"id":"x"}}`,
		`{"job":"bulk-note","key":"%s","noTenant":true,"priority":-100,"delay":"90s","queue":"q2","enqueuedBy":"ops"}`,
		`{"job":"bulk-note","key":"%s","tenant":"acme","delay":30,"priority":100}`,
		`{"job":"bulk-note","key":"%s","noTenant":true,"priority":101}`,
		`{"job":"bulk-note","key":"%s","noTenant":true,"priority":-101}`,
		`{"job":"bulk-note","key":"%s","noTenant":true,"delay":"-1s"}`,
		`{"job":"bulk-note","key":"%s"}`,
		`{"job":"bulk-note","key":"%s","tenant":"a","noTenant":true}`,
		`{"key":"%s","noTenant":true}`,
		`{"job":"bulk-note","key":"%s\u0000","noTenant":true}`,
		`{"job":"bulk-note","key":"%s","noTenant":true,"enqueuedBy":"` + strings.Repeat("o", 1001) + `"}`,
	} {
		st, out := post("/v1/runs", fmt.Sprintf(item, "one"+fmt.Sprint(len(item))))
		var one jobs.EnqueueResult
		var oneErr api.ErrorBody
		if st >= 300 {
			if json.Unmarshal(out, &oneErr) != nil || oneErr.Error == nil {
				t.Fatalf("POST /v1/runs %s = %d %s", item, st, out)
			}
		} else if json.Unmarshal(out, &one) != nil || one.RunID == "" {
			t.Fatalf("POST /v1/runs %s = %d %s", item, st, out)
		}
		st, out = post("/v1/runs/bulk", `{"items":[`+fmt.Sprintf(item, "many"+fmt.Sprint(len(item)))+`]}`)
		var many api.BulkEnqueueResponse
		if st != http.StatusOK || json.Unmarshal(out, &many) != nil || len(many.Items) != 1 {
			t.Fatalf("POST /v1/runs/bulk %s = %d %s", item, st, out)
		}
		it := many.Items[0]
		if oneErr.Error != nil {
			if it.Error == nil || it.Error.Code != oneErr.Error.Code || it.RunID != "" {
				t.Errorf("%s: the single enqueue is refused with %s, the bulk item answers %+v", item, oneErr.Error.Code, it)
			}
			continue
		}
		if it.Error != nil || it.RunID == "" {
			t.Errorf("%s: the single enqueue made run %s, the bulk item answers %+v", item, one.RunID, it)
			continue
		}
		a, err := b.env.Store.RunGet(t.Context(), one.RunID)
		if err != nil {
			t.Fatal(err)
		}
		z, err := b.env.Store.RunGet(t.Context(), it.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if a.Priority != z.Priority || a.Queue != z.Queue || a.EnqueuedBy != z.EnqueuedBy || a.Tenant != z.Tenant ||
			a.NoTenant != z.NoTenant || a.State != z.State || a.ReadyAt.Sub(a.CreatedAt) != z.ReadyAt.Sub(z.CreatedAt) ||
			!bytes.Equal(a.Input, z.Input) || a.TraceParent == "" || a.TraceParent != z.TraceParent {
			t.Errorf("%s:\n single %+v\n bulk   %+v", item, a, z)
		}
	}
}
