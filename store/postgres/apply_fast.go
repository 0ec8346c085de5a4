package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// stepsOnly reports whether every mutation of ms only appends events and at most completes its
// run, one mutation per run: the batches stmtStepsApply can do in one round trip.
func stepsOnly(ms []store.Mutation) bool {
	seen := make(map[string]bool, len(ms))
	for _, m := range ms {
		t := m.Transition
		if seen[m.RunID] || t.Wait != nil || len(t.Timers) > 0 || t.Attempt != 0 ||
			t.ErrorCode != "" || t.Error != "" || t.StopReason != "" || len(m.Events) == 0 {
			return false
		}
		switch t.State {
		case "":
			if t.Result != nil {
				return false
			}
		case store.StateCompleted:
		default:
			return false
		}
		seen[m.RunID] = true
	}
	return true
}

// applySteps is RunApply for a stepsOnly batch: one statement, one round trip, in the implicit
// transaction of its pipeline (no BEGIN and COMMIT statements; sendImplicit says why that is the
// same). A refused mutation (its run cancelled, reclaimed or gone) is found by its absence from
// the statement's result and explained by a read after the commit; refusals are rare.
func (s *Store) applySteps(ctx context.Context, ms []store.Mutation) ([]store.MutationResult, error) {
	n := len(ms)
	// In id order: a plan driven by the batch locks the rows in the order it is sent them (see
	// stmtStepsApply).
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ms[a].RunID, ms[b].RunID) })
	ids, states := make([]string, n), make([]string, n)
	fences, counts, afters := make([]int64, n), make([]int64, n), make([]int64, n)
	results, nows := make([][]byte, n), make([]time.Time, n)
	first := make([]int, n) // per mutation of ms: where its events start in ev
	pos := make([]int, n)   // per mutation of ms: its place in ids
	total := 0
	for i := range ms {
		total += len(ms[i].Events)
	}
	var ev eventRows
	ev.grow(total)
	var implied []bool // per mutation of ms: its RunCompleted lives in the row (implied.go), not sent
	for j, i := range order {
		m := &ms[i]
		pos[i] = j
		ids[j], fences[j], counts[j], states[j], nows[j] = m.RunID, m.Fence, int64(len(m.Events)), string(m.State), m.Now
		afters[j] = m.AfterSeq
		if m.State == store.StateCompleted {
			results[j] = m.Result
			if results[j] == nil {
				results[j] = []byte{}
			}
		}
		ord := &store.Run{ID: m.RunID} // add numbers the run's events 1, 2, … : their ordinals
		events := m.Events
		if s.completedImplied(m) {
			if implied == nil {
				implied = make([]bool, n)
			}
			implied[i] = true
			events = events[:len(events)-1] // counts[j] still counts it: last_seq moves past it
		}
		first[i] = len(ev.runs)
		for _, e := range events {
			ev.add(ord, e)
		}
	}
	runs, applied := make([]store.Run, n), make([]bool, n) // by place in ids
	b := &pgx.Batch{}
	b.Queue(s.q(stmtStepsApply), textArray(ids), int8Array(fences), int8Array(counts), textArray(states),
		byteaArray(results), timeArray(nows), textArray(ev.runs), int8Array(ev.seqs), textArray(ev.kinds),
		textArray(ev.names), timeArray(ev.ats), byteaArray(ev.data), int8Array(afters)).
		Query(func(rows pgx.Rows) error {
			sc := runScan{ids: ids} // a row's id is the batch's string
			for rows.Next() {
				r, err := sc.scan(rows)
				if err != nil {
					return err
				}
				if sc.at < 0 {
					return jobs.Errorf(jobs.CodeInvariant, "postgres run apply: the statement returned run %s, not in the batch", r.ID)
				}
				runs[sc.at], applied[sc.at] = r, true
			}
			return rows.Err()
		})
	// One statement: its implicit transaction (sendImplicit) is the whole batch's atomicity.
	if err := s.sendImplicit(ctx, "run apply", b); err != nil {
		return nil, err
	}
	// The events as stored reuse what the statement was sent: their data was copied once (add),
	// and the run was scanned into memory of its own, so neither is copied again.
	out := make([]store.MutationResult, n)
	stored := make([]history.Event, total) // every mutation's Appended, in one allocation
	for i, m := range ms {
		if !applied[pos[i]] {
			out[i] = s.refusal(ctx, m)
			continue
		}
		run := &runs[pos[i]]
		sent := len(m.Events)
		if implied != nil && implied[i] {
			sent--
		}
		base := run.LastSeq - int64(len(m.Events))
		appended := stored[:len(m.Events):len(m.Events)]
		stored = stored[len(m.Events):]
		for j, e := range m.Events {
			e.Seq = base + int64(j+1)
			if j < sent {
				e.Data, e.At = ev.data[first[i]+j], ev.ats[first[i]+j]
			} else { // the implied RunCompleted, as HistoryRead will rebuild it
				e.Data, e.At = slices.Clone(e.Data), pgTime(e.At)
			}
			appended[j] = e
		}
		out[i] = store.MutationResult{Appended: appended, Run: *run}
	}
	return out, nil
}

// refusal explains why a fenced mutation did not apply, from the run's current row.
func (s *Store) refusal(ctx context.Context, m store.Mutation) store.MutationResult {
	run, err := s.RunGet(ctx, m.RunID)
	switch {
	case jobs.HasCode(err, jobs.CodeRunNotFound):
		return store.MutationResult{Err: err}
	case err != nil:
		// The mutation was refused; only the reason is unknown. Lease lost is the safe answer:
		// the worker stops writing.
		return store.MutationResult{Err: jobs.Wrap(jobs.CodeJobLeaseLost, err, "run %s: refused", m.RunID)}
	case run.State == store.StateCancelled:
		return store.MutationResult{Err: jobs.Errorf(jobs.CodeAborted, "run %s was cancelled", m.RunID), Run: run}
	case run.State == store.StateRunning && run.Fence == m.Fence && store.StaleSeq(run, m) != nil:
		return store.MutationResult{Err: store.StaleSeq(run, m), Run: run}
	}
	return store.MutationResult{Err: jobs.Errorf(jobs.CodeJobLeaseLost, "run %s: fence %d is stale or the run is %s", m.RunID, m.Fence, run.State), Run: run}
}
