package postgres

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// createRounds bounds how often RunCreate retries a key whose live holder finished between our
// insert (which found it live) and our read of it (which no longer does). Each retry needs
// another transaction to finish that run in a window of microseconds; a second in a row would
// already be remarkable.
const createRounds = 8

// RunCreate inserts the runs with ON CONFLICT DO NOTHING against the partial unique index on
// (job, tenant, key) over live states (store.LiveKey), then reads the live run of every key in
// the same pipeline. Postgres
// makes an insert that conflicts with an uncommitted row wait for that row's transaction, so of
// two concurrent creates of one key exactly one inserts, and the other, reading in a fresh
// snapshot after its insert returned, sees the winner's committed row. Two round trips: insert and
// read, then history, timers and commit.
func (s *Store) RunCreate(ctx context.Context, ps []store.CreateRunParams) ([]store.CreateRunResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	t, err := s.begin(ctx, "run create")
	if err != nil {
		return nil, err
	}
	defer t.release()
	out, b, err := s.createRuns(ctx, t, ps)
	if err != nil {
		return nil, err
	}
	if err := t.commit(ctx, b); err != nil {
		return nil, err
	}
	// A run this call inserted was scanned into memory of its own; only a live holder can be
	// the result of several items (the same key twice in one call), so only those are copied
	// apart.
	for i := range out {
		if out[i].Deduped {
			out[i].Run = cloneRun(out[i].Run)
		}
	}
	return out, nil
}

// createRuns is RunCreate inside t, up to its last pipeline: it returns the results and the
// pipeline of writes (history, timers, notifications) that t's commit must carry.
func (s *Store) createRuns(ctx context.Context, t *txn, ps []store.CreateRunParams) ([]store.CreateRunResult, *pgx.Batch, error) {
	if len(ps) == 0 {
		return nil, t.batch(), nil
	}
	for i, p := range ps {
		if p.Run.ID == "" {
			return nil, nil, jobs.Errorf(jobs.CodeInvariant, "create run %d of %d: no id", i+1, len(ps))
		}
		if p.Run.State != store.StateReady && p.Run.State != store.StateDelayed {
			return nil, nil, jobs.Errorf(jobs.CodeInvariant, "create run %s in state %q: want ready or delayed",
				p.Run.ID, p.Run.State)
		}
	}
	out := make([]store.CreateRunResult, len(ps))
	var written []int // the params whose run this call inserted
	pending := make([]int, len(ps))
	for i := range pending {
		pending[i] = i
	}
	for round := 0; len(pending) > 0; round++ {
		if round == createRounds {
			return nil, nil, jobs.Errorf(jobs.CodeStoreUnavailable,
				"postgres run create: the live run of a key kept finishing under us (%d rounds)", round)
		}
		n := len(pending)
		var (
			ids, jobNames, queues, keys = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			tenants, enqueuers, states  = make([]string, n), make([]string, n), make([]string, n)
			noTenant                    = make([]bool, n)
			inputs                      = make([][]byte, n)
			attempts                    = make([]int32, n)
			readyAts                    = make([]pgtype.Timestamptz, n)
			createdAts                  = make([]time.Time, n)
			traceParents, traceStates   = make([]string, n), make([]string, n)
			priorities                  = make([]int32, n)
		)
		for j, i := range pending {
			r := ps[i].Run
			ids[j], jobNames[j], queues[j], keys[j] = r.ID, r.Job, r.Queue, r.Key
			tenants[j], enqueuers[j], states[j] = r.Tenant, r.EnqueuedBy, string(r.State)
			noTenant[j], inputs[j], attempts[j] = r.NoTenant, r.Input, int32(r.Attempt)
			readyAts[j], createdAts[j] = ts(r.ReadyAt), r.CreatedAt
			traceParents[j], traceStates[j] = r.TraceParent, r.TraceState
			priorities[j] = int32(r.Priority)
		}
		inserted := map[string]bool{}
		live := map[store.LiveKey]*store.Run{}
		b := t.batch()
		b.Queue(s.q(stmtRunInsert), textArray(ids), textArray(jobNames), textArray(queues),
			textArray(keys), textArray(tenants), noTenant, textArray(enqueuers), byteaArray(inputs),
			textArray(states), attempts, tsArray(readyAts), timeArray(createdAts),
			textArray(traceParents), textArray(traceStates), priorities).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				inserted[id] = true
			}
			return rows.Err()
		})
		b.Queue(s.q(stmtRunsLive), textArray(jobNames), textArray(tenants), textArray(keys)).Query(func(rows pgx.Rows) error {
			var sc runScan
			for rows.Next() {
				r, err := sc.scan(rows)
				if err != nil {
					return err
				}
				live[r.LiveKey()] = &r
			}
			return rows.Err()
		})
		if err := t.send(ctx, b); err != nil {
			if isUniqueViolation(err, "runs_pkey") {
				return nil, nil, jobs.Wrap(jobs.CodeInvariant, err, "postgres run create: a run id is taken")
			}
			return nil, nil, err
		}
		var next []int
		for _, i := range pending {
			p := ps[i]
			r := live[p.Run.LiveKey()]
			switch {
			case r == nil:
				next = append(next, i)
			case inserted[p.Run.ID] && r.ID == p.Run.ID:
				out[i] = store.CreateRunResult{Run: *r}
				written = append(written, i)
			default:
				out[i] = store.CreateRunResult{Run: *r, Deduped: true}
			}
		}
		pending = next
	}

	var evs eventRows
	var timers timerRows
	var ready []string
	for _, i := range written {
		p := ps[i]
		if !s.startedImplied(&p) {
			first := store.Run{ID: p.Run.ID} // LastSeq 0: RunStarted is seq 1
			evs.add(&first, p.Started)
		}
		if p.Timer != nil {
			timers.add(p.Run.ID, *p.Timer)
		}
		if p.Run.State == store.StateReady {
			ready = append(ready, p.Run.Queue)
		}
	}
	b := t.batch()
	evs.queue(s, b)
	timers.queue(s, b)
	s.notifyFresh(b, ready)
	return out, b, nil
}

// RunClaim is one statement (one round trip): pick under SKIP LOCKED, then bump the fence.
func (s *Store) RunClaim(ctx context.Context, p store.ClaimParams) ([]store.Run, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	limit := p.Total()
	if limit <= 0 || len(p.Queues) == 0 {
		return nil, nil
	}
	workers, limits := claimShares(p)
	// A queue named twice would be read twice, and its rows (locked by this very statement, so
	// not skipped) would fill the limit twice over.
	queues := slices.Clone(p.Queues)
	slices.Sort(queues)
	queues = slices.Compact(queues)
	if !p.OldestFirst {
		return s.claimFair(ctx, p, queues, limit, workers, limits)
	}
	// One pipeline, one implicit transaction: how it commits, then the claim (epoch.go).
	b := &pgx.Batch{}
	b.Queue(s.render(sqlClaimSettings))
	if len(p.Shares) > 0 {
		b.Queue(s.q(stmtRunClaimShared), queues, workers, p.StickyBefore, limit, ts(p.LeaseUntil), p.Now, limits)
	} else {
		b.Queue(s.q(stmtRunClaim), queues, workers, p.StickyBefore, limit, ts(p.LeaseUntil), p.Now)
	}
	br := s.pool.SendBatch(ctx, b)
	out, err := readClaim(br, make([]store.Run, 0, min(limit, 256)))
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, unavailable("run claim", err)
	}
	// UPDATE … RETURNING gives no order; the contract's is oldest ReadyAt first.
	slices.SortFunc(out, func(a, b store.Run) int {
		if c := a.ReadyAt.Compare(b.ReadyAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// claimShares is a claim's shares as the claim statements take them: the workers and their limits.
func claimShares(p store.ClaimParams) ([]string, []int32) {
	shares := p.Claimers()
	workers, limits := make([]string, len(shares)), make([]int32, len(shares))
	for i, sh := range shares {
		workers[i], limits[i] = sh.WorkerID, int32(min(sh.Limit, math.MaxInt32))
	}
	return workers, limits
}

// RunHeartbeat's passes over the leases it found locked before it takes each of them alone, and
// the pause before each pass.
const (
	heartbeatPasses = 2
	heartbeatPause  = 2 * time.Millisecond
)

// RunHeartbeat extends the leases still held and returns each lease's run state so a refusal can
// say why: the runs no other transaction holds in one statement, in id order, then those a step
// batch was writing, again the same way and at last each alone.
func (s *Store) RunHeartbeat(ctx context.Context, p store.HeartbeatParams) ([]error, error) {
	out := make([]error, len(p.Leases))
	if len(p.Leases) == 0 {
		return out, nil
	}
	ids, fences := make([]string, len(p.Leases)), make([]int64, len(p.Leases))
	for i, l := range p.Leases {
		ids[i], fences[i] = l.RunID, l.Fence
	}
	// First every lease whose row nobody holds, in one statement that waits for no row; then, a
	// moment later, the ones it passed over, the same way (a step batch holds its rows for a few
	// milliseconds); then each one still held, alone (stmtHeartbeat says why).
	skipped, err := s.heartbeat(ctx, stmtHeartbeat, p, ids, fences, nil, out)
	if err != nil {
		return nil, err
	}
	for pass := 0; pass < heartbeatPasses && len(skipped) > 0; pass++ {
		select {
		case <-ctx.Done():
			return nil, unavailable("run heartbeat", ctx.Err())
		case <-time.After(heartbeatPause):
		}
		sub, subFences := make([]string, len(skipped)), make([]int64, len(skipped))
		for k, i := range skipped {
			sub[k], subFences[k] = ids[i], fences[i]
		}
		if skipped, err = s.heartbeat(ctx, stmtHeartbeat, p, sub, subFences, skipped, out); err != nil {
			return nil, err
		}
	}
	for _, i := range skipped {
		gone, err := s.heartbeat(ctx, stmtHeartbeatOne, p, ids[i:i+1], fences[i:i+1], []int{i}, out)
		if err != nil {
			return nil, err
		}
		if len(gone) > 0 { // the row was deleted while the statement waited for its lock
			out[i] = notFound(p.Leases[i].RunID)
		}
	}
	return out, nil
}

// heartbeat runs one of RunHeartbeat's statements over ids and fences, which are the leases of
// p at the indexes at (all of them when at is nil), and writes each answer to out. It returns
// the indexes of the leases whose rows were locked and so passed over.
func (s *Store) heartbeat(ctx context.Context, st stmt, p store.HeartbeatParams, ids []string, fences []int64,
	at []int, out []error) ([]int, error) {
	rows, err := s.pool.Query(ctx, s.q(st), ids, fences, ts(p.LeaseUntil))
	if err != nil {
		return nil, unavailable("run heartbeat", err)
	}
	defer rows.Close()
	var skipped []int
	seen := 0
	for rows.Next() {
		var ord int64
		var state string
		var extended, passed bool
		if err := rows.Scan(&ord, &state, &extended, &passed); err != nil {
			return nil, unavailable("run heartbeat", err)
		}
		i := int(ord - 1)
		if at != nil {
			i = at[i]
		}
		l := p.Leases[i]
		switch {
		case extended:
			out[i] = nil
		case passed:
			skipped = append(skipped, i)
		case state == "":
			out[i] = notFound(l.RunID)
		case store.State(state) == store.StateCancelled:
			out[i] = jobs.Errorf(jobs.CodeAborted, "run %s was cancelled", l.RunID)
		default:
			out[i] = jobs.Errorf(jobs.CodeJobLeaseLost, "run %s is %s; the lease of fence %d is no longer held",
				l.RunID, state, l.Fence)
		}
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("run heartbeat", err)
	}
	if seen != len(ids) {
		return nil, jobs.Errorf(jobs.CodeInvariant, "postgres run heartbeat: %d answers for %d leases", seen, len(ids))
	}
	return skipped, nil
}

func (s *Store) RunGet(ctx context.Context, id string) (store.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, s.q(stmtRunGet), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Run{}, notFound(id)
	}
	if err != nil {
		return store.Run{}, unavailable("run get", err)
	}
	return r, nil
}

// RunList lists newest first, by id (time-ordered); Before pages on the id.
func (s *Store) RunList(ctx context.Context, p store.ListParams) ([]store.Run, error) {
	rows, err := s.pool.Query(ctx, s.q(stmtRunList), p.Queue, string(p.State), p.Job, p.Tenant, p.Before,
		limitArg(p.Limit))
	if err != nil {
		return nil, unavailable("run list", err)
	}
	byID := map[string]*store.Run{}
	var order []string
	if err := collectRuns(rows, byID, &order); err != nil {
		return nil, unavailable("run list", err)
	}
	var out []store.Run
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
}

// limitArg is a LIMIT argument: n, or NULL (no limit) when n ≤ 0.
func limitArg(n int) *int64 {
	if n <= 0 {
		return nil
	}
	v := int64(n)
	return &v
}

// lockRun locks run id in t's first pipeline and returns it (nil when there is none).
func (s *Store) lockRun(ctx context.Context, t *txn, id string) (*store.Run, error) {
	runs := map[string]*store.Run{}
	b := t.batch()
	b.Queue(s.q(stmtRunLock), id).Query(func(rows pgx.Rows) error { return collectRuns(rows, runs, nil) })
	if err := t.send(ctx, b); err != nil {
		return nil, err
	}
	return runs[id], nil
}

// RunCancel: lock the run, then append, update, drop its timers and waits and commit. Two
// round trips.
func (s *Store) RunCancel(ctx context.Context, id string, event history.Event, now time.Time) (store.Run, error) {
	t, err := s.begin(ctx, "run cancel")
	if err != nil {
		return store.Run{}, err
	}
	defer t.release()
	r, err := s.lockRun(ctx, t, id)
	if err != nil {
		return store.Run{}, err
	}
	if r == nil {
		return store.Run{}, notFound(id)
	}
	if r.State.Finished() {
		return store.Run{}, jobs.Errorf(jobs.CodeJobNotCancellable, "run %s is already %s", id, r.State)
	}
	var evs eventRows
	evs.add(r, event)
	now = pgTime(now)
	r.State, r.WorkerID, r.LeaseUntil = store.StateCancelled, "", time.Time{}
	r.UpdatedAt, r.FinishedAt = now, now

	b := t.batch()
	evs.queue(s, b)
	b.Queue(s.q(stmtRunCancel), id, r.LastSeq, now)
	// A cancelled run waits for nothing: its timers and waits go with it (a worker holding it is
	// refused by the state, X_ABORTED).
	b.Queue(s.q(stmtTimersClear), []string{id})
	b.Queue(s.q(stmtWaitsClear), []string{id})
	if err := t.commit(ctx, b); err != nil {
		return store.Run{}, err
	}
	return cloneRun(*r), nil
}

// RunRetry: lock the run, then append, reopen and commit. The partial unique index refuses the
// reopening when a new live run took the key meanwhile; that is X_JOB_NOT_RETRYABLE.
func (s *Store) RunRetry(ctx context.Context, p store.RetryParams) (store.Run, error) {
	t, err := s.begin(ctx, "run retry")
	if err != nil {
		return store.Run{}, err
	}
	defer t.release()
	r, err := s.lockRun(ctx, t, p.RunID)
	if err != nil {
		return store.Run{}, err
	}
	if r == nil {
		return store.Run{}, notFound(p.RunID)
	}
	if r.State != store.StateFailed && r.State != store.StateBlocked {
		return store.Run{}, jobs.Errorf(jobs.CodeJobNotRetryable, "run %s is %s", p.RunID, r.State)
	}
	if err := store.StaleRetry(*r, p); err != nil {
		return store.Run{}, err
	}
	var evs eventRows
	evs.add(r, p.Event)
	now := pgTime(p.Now)
	r.State, r.Attempt, r.WorkerID, r.LeaseUntil = store.StateReady, store.RetriedAttempt(*r), "", time.Time{}
	r.ErrorCode, r.Error, r.StopReason = "", "", ""
	r.ReadyAt, r.UpdatedAt, r.FinishedAt = now, now, time.Time{}

	b := t.batch()
	evs.queue(s, b)
	b.Queue(s.q(stmtRunRetry), p.RunID, now, r.LastSeq, r.Attempt)
	s.notifyReady(b, []string{r.Queue})
	if err := t.commit(ctx, b); err != nil {
		if isUniqueViolation(err, "runs_live_key") {
			return store.Run{}, store.RetryKeyHeld(p.RunID)
		}
		return store.Run{}, err
	}
	return cloneRun(*r), nil
}

// RunExpireLeases is one statement: lapsed leases under SKIP LOCKED, made ready, notified.
func (s *Store) RunExpireLeases(ctx context.Context, now time.Time, limit int) ([]store.Woken, error) {
	rows, err := s.pool.Query(ctx, s.q(stmtRunsExpire), now, limitArg(limit), s.chReady)
	if err != nil {
		return nil, unavailable("run expire leases", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Woken, error) {
		var w store.Woken
		err := row.Scan(&w.RunID, &w.Queue)
		return w, err
	})
	if err != nil {
		return nil, unavailable("run expire leases", err)
	}
	return out, nil
}

// HistoryRead reads the events and whether the run exists in one pipeline (one round trip), so
// an unknown run is told from a run with nothing after afterSeq.
func (s *Store) HistoryRead(ctx context.Context, runID string, afterSeq int64, limit int) ([]history.Event, error) {
	lastSeq := int64(-1)
	var head store.Run
	var out []history.Event
	b := &pgx.Batch{}
	b.Queue(s.q(stmtHistoryHead), runID, afterSeq).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var finished pgtype.Timestamptz
			if err := rows.Scan(&lastSeq, &head.Job, &head.Queue, &head.Key, &head.Tenant,
				&head.NoTenant, &head.EnqueuedBy, &head.CreatedAt, &head.Input, &head.State,
				&head.Result, &finished); err != nil {
				return err
			}
			head.LastSeq, head.FinishedAt = lastSeq, finished.Time
		}
		return rows.Err()
	})
	b.Queue(s.q(stmtHistoryRead), runID, afterSeq, limitArg(limit)).Query(func(rows pgx.Rows) error {
		// The run's last seq, read a moment before, sizes the result: a replay reads whole
		// histories, and growing the slice by doubling copied it about log2(n) times. It is only
		// a hint (an event appended in between is appended as before).
		if n := lastSeq - afterSeq; n > 0 {
			if limit > 0 && n > int64(limit) {
				n = int64(limit)
			}
			out = make([]history.Event, 0, min(n, 4096))
		}
		// One set of scan targets for every row (each address the driver holds escaped, a heap
		// allocation a row), and the kind read from the driver's buffer and interned: kinds are
		// a handful of names, and a string made for each was garbage at once.
		var e history.Event
		var kind pgtype.DriverBytes
		dest := []any{&e.Seq, &kind, &e.Name, &e.At, &e.Data}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			e.Kind, e.At = internKind(kind), e.At.UTC()
			out = append(out, e)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, unavailable("history read", err)
	}
	if lastSeq < 0 {
		return nil, notFound(runID)
	}
	return withImplied(out, &head, afterSeq, limit), nil
}

// knownKinds maps each event kind's name to the kind, so a scanned kind costs no string.
var knownKinds = func() map[string]history.Kind {
	m := map[string]history.Kind{}
	for _, k := range []history.Kind{history.KindRunStarted, history.KindStepCompleted,
		history.KindTimerStarted, history.KindTimerFired, history.KindEventWaitStarted,
		history.KindEventReceived, history.KindEventWaitTimedOut, history.KindAttemptFailed,
		history.KindRunBlocked, history.KindRunRetried, history.KindRunCompleted, history.KindRunFailed,
		history.KindRunCancelled, history.KindEventPublished, history.KindChildEnqueued,
		history.KindVersionMarked, history.KindStepFailed} {
		m[string(k)] = k
	}
	return m
}()

// internKind is the kind named b (memory the driver reuses for the next row): a known kind
// without a copy, any other copied.
func internKind(b []byte) history.Kind {
	if k, ok := knownKinds[string(b)]; ok {
		return k
	}
	return history.Kind(b)
}

// QueueStats counts runs by queue and state; Counts holds the states with at least one run.
func (s *Store) QueueStats(ctx context.Context) ([]store.QueueStats, error) {
	rows, err := s.pool.Query(ctx, s.q(stmtQueueStats))
	if err != nil {
		return nil, unavailable("queue stats", err)
	}
	defer rows.Close()
	var out []store.QueueStats
	for rows.Next() {
		var queue, state string
		var n int
		var oldest pgtype.Timestamptz
		if err := rows.Scan(&queue, &state, &n, &oldest); err != nil {
			return nil, unavailable("queue stats", err)
		}
		if len(out) == 0 || out[len(out)-1].Queue != queue {
			out = append(out, store.QueueStats{Queue: queue, Counts: map[store.State]int{}})
		}
		q := &out[len(out)-1]
		q.Counts[store.State(state)] = n
		if oldest.Valid {
			q.OldestReady = oldest.Time.UTC()
		}
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("queue stats", err)
	}
	return out, nil
}
