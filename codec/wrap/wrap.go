// Package wrap applies a codec.Set on the application's side of the engine: on a worker's
// frontend (the in-process engine or an api.Client) and on an enqueuer. Everything the worker
// sends to be stored (step outputs, results, the inputs of runs it enqueues) is encoded, and
// everything it reads back (the task's input, the history it replays) is opened, so the job code
// sees plain values and the engine stores only envelopes. The engine needs no key.
//
// Published event payloads are encoded by Publisher, and a run's jobs.PublishMatch by Frontend:
// both send the fields waits match on beside the payload (in the clear). A run's plain
// jobs.Publish is not encoded: the engine matches on its payload's fields.
package wrap

import (
	"bytes"
	"context"
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
)

// Frontend returns fe with set applied: hand it to worker.Config.Frontend.
func Frontend(fe frontend.Frontend, set *codec.Set) frontend.Frontend {
	sent, _ := lru.New[sentKey, []frontend.Command](4096)
	return &codecFrontend{Frontend: fe, set: set, sent: sent}
}

type codecFrontend struct {
	frontend.Frontend
	set *codec.Set
	// sent keeps each record's encoded commands until the next one: a resend (Retry) must carry
	// the very bytes it sent the first time, because the engine recognises a record that landed
	// by comparing them, and a codec with a random nonce never encodes the same value twice.
	sent *lru.Cache[sentKey, []frontend.Command]
}

type sentKey struct {
	runID    string
	fence    int64
	afterSeq int64
}

func (f *codecFrontend) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	tasks, err := f.Frontend.Poll(ctx, req)
	for i := range tasks {
		tasks[i].Input = f.open(tasks[i].Input)
		tasks[i].Tail = f.openEvents(tasks[i].Tail) // resumed from as a history read is
	}
	return tasks, err
}

func (f *codecFrontend) Record(ctx context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	k := sentKey{req.RunID, req.Fence, req.AfterSeq}
	cmds, ok := f.sent.Get(k)
	if !ok || !req.Retry || len(cmds) != len(req.Commands) {
		var err error
		if cmds, err = f.encode(req.Commands); err != nil {
			return frontend.RecordResponse{}, err
		}
		f.sent.Add(k, cmds)
	}
	req.Commands = cmds
	resp, err := f.Frontend.Record(ctx, req)
	resp.Appended = f.openEvents(resp.Appended)
	return resp, err
}

func (f *codecFrontend) History(ctx context.Context, runID string, afterSeq int64) ([]history.Event, error) {
	evs, err := f.Frontend.History(ctx, runID, afterSeq)
	return f.openEvents(evs), err
}

// encode returns copies of cmds with their stored values encoded; the caller's are untouched, so
// its own resend does not encode twice.
func (f *codecFrontend) encode(cmds []frontend.Command) ([]frontend.Command, error) {
	out := slices.Clone(cmds)
	for i := range out {
		c := &out[i]
		switch c.Kind {
		case frontend.CmdStep, frontend.CmdComplete:
			if len(c.Output) == 0 {
				continue
			}
			b, err := f.set.Encode(c.Output)
			if err != nil {
				return nil, jobs.Wrap(jobs.CodeEncoding, err, "encode the output of %s %q", c.Kind, c.Name)
			}
			c.Output = b
		case frontend.CmdPublish:
			// Only a publish that names its match fields: the engine reads the others' fields.
			if !c.Matched || len(c.Output) == 0 {
				continue
			}
			b, err := f.set.Encode(c.Output)
			if err != nil {
				return nil, jobs.Wrap(jobs.CodeEncoding, err, "encode the payload of %s %q", c.Kind, c.Name)
			}
			c.Output = b
		case frontend.CmdEnqueue:
			if c.Effect == nil || len(c.Effect.Input) == 0 {
				continue
			}
			fx := *c.Effect
			b, err := f.set.Encode(fx.Input)
			if err != nil {
				return nil, jobs.Wrap(jobs.CodeEncoding, err, "encode the input of %q", c.Name)
			}
			fx.Input = b
			c.Effect = &fx
		}
	}
	return out, nil
}

// open returns b's plain payload, or the innermost envelope the set cannot open (codec.Set.Peel):
// the job's decode then fails with X_ENCODING naming the codec it lacks, and the attempt reports
// it.
func (f *codecFrontend) open(b []byte) []byte {
	out, _ := f.set.Peel(b)
	return out
}

func (f *codecFrontend) openEvents(evs []history.Event) []history.Event {
	for i, e := range evs {
		evs[i] = OpenEvent(e, f.set)
	}
	return evs
}

// OpenEvent returns e with the payload it carries (a RunStarted's input, a step's output, a
// received event's payload or the result inside a child's outcome, a result) opened by set, as
// far as it can (openField). An event with nothing to open is returned as is, byte for byte.
func OpenEvent(e history.Event, set *codec.Set) history.Event {
	p, err := e.Decode()
	if err != nil {
		return e
	}
	opened := false
	switch x := p.(type) {
	case history.RunStarted:
		opened = openField(&x.Input, set)
		p = x
	case history.StepCompleted:
		opened = openField(&x.Output, set)
		p = x
	case history.EventReceived:
		opened = openField(&x.Payload, set) || openChildResult(&x, set)
		p = x
	case history.RunCompleted:
		opened = openField(&x.Result, set)
		p = x
	}
	if !opened {
		return e
	}
	out := history.New(e.At, p)
	out.Seq = e.Seq
	return out
}

// openChildResult opens the result inside a child's outcome. The child stored its result
// encoded, and the engine, which holds no key, hands it to the parent inside the outcome it
// encodes in the clear (jobs.ChildOutcome), so the envelope is one level down.
func openChildResult(x *history.EventReceived, set *codec.Set) bool {
	if !history.IsChildEventID(x.EventID) {
		return false
	}
	var o jobs.ChildOutcome
	if jobs.Decode(x.Payload, &o) != nil || !openField(&o.Result, set) {
		return false
	}
	b, err := jobs.Encode(o)
	if err != nil {
		return false
	}
	x.Payload = b
	return true
}

// openField opens *b in place when it is an envelope, as far as set can (codec.Set.Peel). What
// set cannot open stays an envelope, the innermost one: the job's decode names that codec, and
// not an outer one whose key this side holds (a Stack's encryption, when it lacks the
// compression under it). Nothing opened leaves *b, and so the event, as it was.
func openField(b *[]byte, set *codec.Set) bool {
	if !codec.IsEnvelope(*b) {
		return false
	}
	out, _ := set.Peel(*b)
	if bytes.Equal(out, *b) {
		return false
	}
	*b = out
	return true
}

// Enqueuer returns e with set applied to every enqueued input: hand it to Job.Enqueue (the
// in-process engine or an api.Client) where the application enqueues.
func Enqueuer(e jobs.Enqueuer, set *codec.Set) jobs.Enqueuer { return enqueuer{e, set} }

type enqueuer struct {
	jobs.Enqueuer
	set *codec.Set
}

func (q enqueuer) Enqueue(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	if len(req.Input) > 0 {
		b, err := q.set.Encode(req.Input)
		if err != nil {
			return jobs.EnqueueResult{}, jobs.Wrap(jobs.CodeEncoding, err, "encode the input of %q", req.Job)
		}
		req.Input = b
	}
	return q.Enqueuer.Enqueue(ctx, req)
}
