package engine

import (
	"context"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
)

// An operator's read of a run's history (a dump: the HTTP API, client.InProcess) goes a page at
// a time, so that what it holds at once is a page, not the history: a workflow of thousands of
// 1 MiB steps has gigabytes of history, and a dump of it read whole (History) held several times
// that in the engine at once.
const (
	// DumpPageEvents bounds the events of one page.
	DumpPageEvents = 500
	// DumpPageBytes bounds the bytes of one page's events (their payloads and names), as far as
	// the store lets it: HistoryRead bounds a read by events, not bytes, so the bound is kept by
	// events. The first page is dumpFirstPage events; each later page is as many events as fit
	// DumpPageBytes at the largest event read so far (at least one, at most DumpPageEvents). A
	// page passes the bound only when its events are larger than every event before them.
	DumpPageBytes = 8 << 20
	// dumpFirstPage is the first page's events, read before anything is known of their size.
	dumpFirstPage = 16
	// dumpEventOverhead is what an event costs beyond its payload and name.
	dumpEventOverhead = 64
)

// HistoryPages reads run runID's history a page at a time, for an operator's dump: pass the
// result to history.DumpPages. Each call returns the events after seq after; an empty page is
// the end. A run that does not exist is X_RUN_NOT_FOUND on the first page (the store's
// HistoryRead).
//
// Unlike History, it does not fold what it reads into the run's ledger (settle): that is for a
// worker continuing the run, and an operator's read, a page at a time, is not one.
func (e *Engine) HistoryPages(ctx context.Context, runID string) history.PageFunc {
	p := &historyPager{e: e, ctx: ctx, runID: runID, limit: dumpFirstPage}
	return p.next
}

// historyPager is one dump's read of a history.
type historyPager struct {
	e       *Engine
	ctx     context.Context
	runID   string
	limit   int // the next page's events
	largest int // the largest event read so far, in bytes (dumpEventOverhead included)
}

func (p *historyPager) next(after int64) ([]history.Event, error) {
	events, err := p.e.store.HistoryRead(p.ctx, p.runID, after, p.limit)
	if err != nil {
		return nil, err
	}
	if len(events) > p.limit || len(events) > 0 && events[0].Seq <= after {
		return nil, jobs.Errorf(jobs.CodeInvariant, "history of run %s: a read of %d events after seq %d answered %d from seq %d",
			p.runID, p.limit, after, len(events), events[0].Seq)
	}
	for _, ev := range events {
		p.largest = max(p.largest, len(ev.Data)+len(ev.Name)+dumpEventOverhead)
	}
	if p.largest > 0 {
		p.limit = min(max(DumpPageBytes/p.largest, 1), DumpPageEvents)
	}
	return events, nil
}
