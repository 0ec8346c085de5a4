package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/worker"
)

// slowRecords counts the worker-protocol record requests a client sends, and holds each for a
// moment, as a busy engine's commit would: records of other runs queue behind it meanwhile.
type slowRecords struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs map[string]int
}

func (s *slowRecords) RoundTrip(r *http.Request) (*http.Response, error) {
	if p := r.URL.Path; p == "/v1/worker/record" || p == "/v1/worker/records" {
		s.mu.Lock()
		s.reqs[p]++
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond) // transport latency, not the logic under test
	}
	return s.next.RoundTrip(r)
}

func (s *slowRecords) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[path]
}

var batchedJob = jobs.MustDefine("batched", func(i int) string { return fmt.Sprint(i) }, jobs.NoTenant[int](),
	func(c *jobs.Ctx, in int) (int, error) {
		sum := in
		for i := 0; i < 4; i++ {
			v, err := jobs.Step(c, fmt.Sprintf("s%d", i), func(context.Context) (int, error) { return in + i, nil })
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})

// With WithRecordBatching, a remote worker's concurrent runs share record requests: the records that queue while one is
// in flight go together in POST /v1/worker/records, and every run's history is what one record
// per request would have written.
func TestRemoteRecordsAreBatched(t *testing.T) {
	t.Parallel()
	rt := &slowRecords{next: http.DefaultTransport, reqs: map[string]int{}}
	b := setup(t, api.Config{}, api.WithHTTPClient(&http.Client{Transport: rt}), api.WithRecordBatching())
	reg, err := jobs.NewRegistry(batchedJob)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, worker.Config{Frontend: b.client, Registry: reg, Clock: b.env.Clock, Logger: b.env.Logger,
		PollWait: time.Second, Concurrency: 16})
	const runs = 16
	ids := make([]string, runs)
	for i := range ids {
		res, err := batchedJob.Enqueue(t.Context(), b.env.Engine, i)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.RunID
	}
	for i, id := range ids {
		run := b.env.Await(id, store.StateCompleted)
		var got int
		if err := jobs.Decode(run.Result, &got); err != nil {
			t.Fatal(err)
		}
		if want := i + (i + 0) + (i + 1) + (i + 2) + (i + 3); got != want {
			t.Errorf("run %d: result %d, want %d", i, got, want)
		}
		kinds := testenv.Kinds(b.env.History(id))
		want := []string{string(history.KindRunStarted), "StepCompleted:s0", "StepCompleted:s1", "StepCompleted:s2", "StepCompleted:s3", string(history.KindRunCompleted)}
		if fmt.Sprint(kinds) != fmt.Sprint(want) {
			t.Errorf("run %d: history %v, want %v", i, kinds, want)
		}
	}
	single, batched := rt.count("/v1/worker/record"), rt.count("/v1/worker/records")
	t.Logf("%d records sent in %d single and %d batched requests", runs*5, single, batched)
	if batched == 0 {
		t.Fatalf("no batched record request; %d single ones for %d records", single, runs*5)
	}
	if single+batched >= runs*5 {
		t.Errorf("%d requests for %d records: nothing was batched", single+batched, runs*5)
	}
}

// A batch is answered record by record: a stale record is refused in its place and changes
// nothing, the other lands; an empty batch is refused as a whole.
func TestRecordsRefusesEachOnItsOwn(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	testenv.Declare(t, b.env.Engine, "w1", batchedJob)
	for i := 0; i < 2; i++ {
		if _, err := batchedJob.Enqueue(t.Context(), b.env.Engine, i); err != nil {
			t.Fatal(err)
		}
	}
	var tasks []frontend.Task
	for len(tasks) < 2 {
		got, err := b.client.Poll(t.Context(), frontend.PollRequest{WorkerID: "w1", Queues: []string{jobs.DefaultQueue}, Max: 2, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, got...)
	}
	out, _ := jobs.Encode(1)
	rec := func(task frontend.Task, fence int64) frontend.RecordRequest {
		return frontend.RecordRequest{RunID: task.RunID, Fence: fence, AfterSeq: task.LastSeq, WorkerID: "w1",
			LeaseToken: task.LeaseToken, Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "s0", Output: out}}}
	}
	body, err := msgpack.Marshal(api.RecordsRequest{Records: []frontend.RecordRequest{rec(tasks[0], tasks[0].Fence+7), rec(tasks[1], tasks[1].Fence)}})
	if err != nil {
		t.Fatal(err)
	}
	status, _, raw := b.call(t, http.MethodPost, "/v1/worker/records", api.ContentMsgpack, "", body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %q", status, raw)
	}
	var resp api.RecordsResponse
	if err := msgpack.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 2 {
		t.Fatalf("%d results for 2 records", len(resp.Results))
	}
	if e := resp.Results[0].Error; e == nil || e.Code == "" {
		t.Errorf("the stale record: %+v; want a refusal", resp.Results[0])
	}
	if e := resp.Results[1].Error; e != nil || len(resp.Results[1].Response.Appended) != 1 {
		t.Errorf("the valid record: %+v; want its step appended", resp.Results[1])
	}
	if got := len(b.env.History(tasks[0].RunID)); got != 1 {
		t.Errorf("the refused record's run holds %d events, want only RunStarted", got)
	}
	if got := len(b.env.History(tasks[1].RunID)); got != 2 {
		t.Errorf("the landed record's run holds %d events, want 2", got)
	}
	empty, _ := msgpack.Marshal(api.RecordsRequest{})
	if status, _, raw := b.call(t, http.MethodPost, "/v1/worker/records", api.ContentMsgpack, "", empty); status != http.StatusBadRequest {
		t.Errorf("an empty batch: status %d (%q), want 400", status, raw)
	}
}

// batchWatch keeps what every POST /v1/worker/records carried and how it was answered.
type batchWatch struct {
	next http.RoundTripper
	mu   sync.Mutex
	// per batch request: its records' command counts, and the answer's status
	batches  [][]int
	statuses []int
}

func (w *batchWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != "/v1/worker/records" {
		return w.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req api.RecordsRequest
	if err := msgpack.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	counts := make([]int, len(req.Records))
	for i, rec := range req.Records {
		counts[i] = len(rec.Commands)
	}
	time.Sleep(20 * time.Millisecond) // others queue meanwhile
	resp, err := w.next.RoundTrip(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.batches = append(w.batches, counts)
	if resp != nil {
		w.statuses = append(w.statuses, resp.StatusCode)
	}
	return resp, err
}

// Records of a full frontend.MaxRecordCommands each are batched four to a request, the engine's
// bound on a batch's commands: a batch past it would be refused whole, and the client would then
// send every record alone for the rest of its life (a refusal it reads as an engine without the
// batch route).
func TestABatchNeverCarriesMoreCommandsThanTheEngineTakes(t *testing.T) {
	t.Parallel()
	w := &batchWatch{next: http.DefaultTransport}
	b := setup(t, api.Config{}, api.WithHTTPClient(&http.Client{Transport: w}), api.WithRecordBatching())
	full := make([]frontend.Command, frontend.MaxRecordCommands)
	for i := range full {
		full[i] = frontend.Command{Kind: frontend.CmdStep, Name: fmt.Sprintf("s%d", i), Output: []byte{0xc0}}
	}
	const records = 12
	var wg sync.WaitGroup
	errs := make([]error, records)
	for i := range records {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// No run holds these ids: each is refused on its own, in its place in the batch.
			_, errs[i] = b.client.Record(t.Context(), frontend.RecordRequest{RunID: fmt.Sprintf("r%d", i), Fence: 1,
				WorkerID: "w", Commands: full, AfterSeq: 1})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("record %d: %v; want refused on its own, not the batch", i, err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	several := false
	for i, counts := range w.batches {
		total := 0
		for _, n := range counts {
			total += n
		}
		if total > 4*frontend.MaxRecordCommands || w.statuses[i] != http.StatusOK {
			t.Errorf("batch %d: records of %v commands, %d in all, answered %d; want at most %d, answered 200",
				i, counts, total, w.statuses[i], 4*frontend.MaxRecordCommands)
		}
		several = several || len(counts) > 1
	}
	if !several {
		t.Fatalf("no batch carried more than one record (%v): nothing was tested", w.batches)
	}
}
