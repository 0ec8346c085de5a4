package postgres

import (
	"bytes"
	"slices"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// A run's first and last events say nothing its runs row does not. RunStarted (seq 1) holds the
// job, queue, key, tenant, enqueuer and input, at the run's creation time; RunCompleted (the
// last seq of a completed run) holds the result, at its finish. When the event a write is given
// is exactly the one the row implies, byte for byte, the store writes no history row for it and
// HistoryRead rebuilds it from the row (docs/architecture.md, "The first and last events live in
// the run's row"). Each saves a heap row, its primary-key entry and a second copy of the input
// or the result: for a no-op job, both of its history rows.
//
// Anything else (another kind, another time, other fields, an empty input or result, whose
// bytea may read back as NULL and encode differently) is written as before, and a run written
// before this existed has its rows: HistoryRead rebuilds an event only where history has none.
// A completed run is final (a retry reopens failed and blocked runs only), so its row's result
// and finish stay what its last event said.

// impliedStarted is the RunStarted event the run's row implies, with Seq 1.
func impliedStarted(r *store.Run) history.Event {
	e := history.New(r.CreatedAt, history.RunStarted{Job: r.Job, Queue: r.Queue, Input: r.Input,
		Key: r.Key, Tenant: r.Tenant, NoTenant: r.NoTenant, EnqueuedBy: r.EnqueuedBy})
	e.Seq = 1
	return e
}

// startedImplied reports whether p.Started is the event p.Run's row implies once stored, so
// that it need not be written. Times are compared at the microsecond Postgres keeps.
func (s *Store) startedImplied(p *store.CreateRunParams) bool {
	e, r := &p.Started, &p.Run
	if s.writeImplied || e.Kind != history.KindRunStarted || e.Name != "" || len(r.Input) == 0 ||
		e.At.UnixMicro() != r.CreatedAt.UnixMicro() {
		return false
	}
	return bytes.Equal(e.Data, impliedStarted(r).Data)
}

// impliedCompleted is the RunCompleted event a completed run's row implies, with its last seq.
func impliedCompleted(r *store.Run) history.Event {
	e := history.New(r.FinishedAt, history.RunCompleted{Result: r.Result})
	e.Seq = r.LastSeq
	return e
}

// completedImplied reports whether m completes its run with a last event that the completed
// row (result m.Result, finished at m.Now) implies, so that the event need not be written.
func (s *Store) completedImplied(m *store.Mutation) bool {
	if s.writeImplied || m.State != store.StateCompleted || len(m.Result) == 0 || len(m.Events) == 0 {
		return false
	}
	e := &m.Events[len(m.Events)-1]
	if e.Kind != history.KindRunCompleted || e.Name != "" || e.At.UnixMicro() != m.Now.UnixMicro() {
		return false
	}
	return bytes.Equal(e.Data, impliedCompleted(&store.Run{FinishedAt: m.Now, Result: m.Result}).Data)
}

// withImplied completes out, the stored events of a history read after afterSeq (at most limit
// of them, 0 for all), with the events the run's row implies where history holds none: seq 1
// first, the completed run's last seq at the end. head carries the row's fields (Input only
// when afterSeq < 1, Result only when the run is completed).
func withImplied(out []history.Event, head *store.Run, afterSeq int64, limit int) []history.Event {
	if head.LastSeq < 1 {
		return out
	}
	if afterSeq < 1 && (len(out) == 0 || out[0].Seq != 1) {
		out = slices.Insert(out, 0, impliedStarted(head))
		if limit > 0 && len(out) > limit {
			out = out[:limit]
		}
	}
	if head.State == store.StateCompleted && head.LastSeq > afterSeq && (limit <= 0 || len(out) < limit) {
		prev := afterSeq
		if len(out) > 0 {
			prev = out[len(out)-1].Seq
		}
		if prev == head.LastSeq-1 {
			out = append(out, impliedCompleted(head))
		}
	}
	return out
}
