package postgres

import (
	"bytes"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// A run's RunStarted event (seq 1) says nothing its runs row does not: the job, queue, key,
// tenant, enqueuer and input, at the run's creation time. When the event a create is given is
// exactly the one the row implies, byte for byte, the store writes no history row for it and
// HistoryRead rebuilds it from the row (see "The first event lives in the run's row" in
// docs/architecture.md). That is one heap row, one primary-key entry and the input's bytes a
// second time saved on every create, the commonest write of a bulk enqueue and a backlog.
//
// Anything else a caller passes as seq 1 (another kind, another time, other fields) is written
// as before, and a run created before this existed has its row: HistoryRead rebuilds seq 1 only
// when history has none.

// impliedStarted is the RunStarted event the run's row implies, with Seq 1.
func impliedStarted(r *store.Run) history.Event {
	e := history.New(r.CreatedAt, history.RunStarted{Job: r.Job, Queue: r.Queue, Input: r.Input,
		Key: r.Key, Tenant: r.Tenant, NoTenant: r.NoTenant, EnqueuedBy: r.EnqueuedBy})
	e.Seq = 1
	return e
}

// startedImplied reports whether p.Started is the event p.Run's row implies once stored, so
// that it need not be written. The input must be non-empty (an empty one may read back as NULL,
// whose encoding differs) and the times equal at the microsecond Postgres keeps.
func startedImplied(p *store.CreateRunParams) bool {
	e, r := &p.Started, &p.Run
	if e.Kind != history.KindRunStarted || e.Name != "" || len(r.Input) == 0 ||
		e.At.UnixMicro() != r.CreatedAt.UnixMicro() {
		return false
	}
	return bytes.Equal(e.Data, impliedStarted(r).Data)
}
