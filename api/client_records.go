package api

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

// A worker process runs many runs at once, and each step of each run is one record the engine
// must answer before the step returns. Sent one per HTTP request, a busy process pays one
// loopback round trip (and the engine one request's parsing, routing and goroutine) per step.
// The batcher sends the records that queued while a request was in flight together, in one
// POST /v1/worker/records: like the engine's group commit, it adds no wait at low load (a lone
// record goes at once, alone) and the batch grows with the load.
const (
	// recordSenders is how many record requests a client has in flight at once.
	recordSenders = 2
	// batchBytes bounds the outputs of one batch, well below the engine's default MaxBody;
	// a record with more than soloBytes of outputs always goes alone.
	batchBytes = 256 << 10
	soloBytes  = 64 << 10
)

type recordBatcher struct {
	c *Client
	// unsupported is set once the engine answered the batch route as unknown (an older
	// engine): records then go one per request.
	unsupported atomic.Bool

	mu      sync.Mutex
	queue   []*pendingRecord
	sending int
}

type pendingRecord struct {
	ctx  context.Context
	req  frontend.RecordRequest
	size int
	done chan recordOutcome
}

type recordOutcome struct {
	resp frontend.RecordResponse
	err  error
}

func recordSize(req *frontend.RecordRequest) int {
	n := 0
	for _, c := range req.Commands {
		n += len(c.Output) + len(c.Error)
		if c.Effect != nil {
			n += len(c.Effect.Input)
		}
	}
	return n
}

// record sends req alone or in the next batch, and waits for its answer (or ctx).
func (b *recordBatcher) record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	size := recordSize(&req)
	// A traced record goes alone so the engine's span is the caller's child (one request carries
	// one trace header).
	if b.unsupported.Load() || size > soloBytes || trace.SpanContextFromContext(ctx).IsValid() {
		return b.c.recordOne(ctx, req)
	}
	p := &pendingRecord{ctx: ctx, req: req, size: size, done: make(chan recordOutcome, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, p)
	start := b.sending < recordSenders
	if start {
		b.sending++
	}
	b.mu.Unlock()
	if start {
		go b.send()
	}
	select {
	case o := <-p.done:
		return o.resp, o.err
	case <-ctx.Done():
		// As for a single request: the caller's own end is a cancellation, not an outage. The
		// record may still land; a resend marked as a retry finds it.
		return frontend.RecordResponse{}, ctx.Err()
	}
}

// send takes batches off the queue until it is empty.
func (b *recordBatcher) send() {
	for {
		b.mu.Lock()
		n, size, cmds := 0, 0, 0
		for n < len(b.queue) && n < maxBatchRecords && (n == 0 || (size+b.queue[n].size <= batchBytes &&
			cmds+len(b.queue[n].req.Commands) <= maxBatchCommands)) {
			size += b.queue[n].size
			cmds += len(b.queue[n].req.Commands)
			n++
		}
		if n == 0 {
			b.sending--
			b.mu.Unlock()
			return
		}
		batch := make([]*pendingRecord, n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		b.mu.Unlock()
		b.flush(batch)
	}
}

// flush sends one batch and hands each record its answer.
func (b *recordBatcher) flush(batch []*pendingRecord) {
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.done <- recordOutcome{err: err} // its caller left before it was sent: never sent
			continue
		}
		live = append(live, p)
	}
	switch {
	case len(live) == 0:
		return
	case len(live) == 1 || b.unsupported.Load():
		b.alone(live)
		return
	}
	req := RecordsRequest{Records: make([]frontend.RecordRequest, len(live))}
	for i, p := range live {
		req.Records[i] = p.req
	}
	var out RecordsResponse
	err := b.c.callMsgpack(context.Background(), "/v1/worker/records", req, &out, b.c.timeout, jobs.CodeCommitUnknown)
	if err == nil && len(out.Results) != len(live) {
		err = jobs.Errorf(jobs.CodeCommitUnknown, "the engine answered %d records with %d results", len(live), len(out.Results))
	}
	if err != nil {
		switch jobs.CodeOf(err) {
		case jobs.CodeCommitUnknown, jobs.CodeEngineUnreachable:
			// Lost (or never sent): each record's own resend settles it, as for one request.
			for _, p := range live {
				p.done <- recordOutcome{err: err}
			}
			return
		case jobs.CodeBadRequest:
			// The whole request was refused: an engine without the batch route answers 404.
			// Records are checked one by one by the engine, so nothing else refuses them all.
			b.unsupported.Store(true)
		}
		// Refused as a whole (too large, rate limited, unknown route): nothing was recorded,
		// so each goes alone and gets its own answer.
		b.alone(live)
		return
	}
	for i, p := range live {
		if e := out.Results[i].Error; e != nil {
			p.done <- recordOutcome{err: e}
			continue
		}
		p.done <- recordOutcome{resp: out.Results[i].Response}
	}
}

// alone sends each record in its own request, all at once.
func (b *recordBatcher) alone(batch []*pendingRecord) {
	var wg sync.WaitGroup
	for _, p := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := b.c.recordOne(p.ctx, p.req)
			p.done <- recordOutcome{resp: resp, err: err}
		}()
	}
	wg.Wait()
}
