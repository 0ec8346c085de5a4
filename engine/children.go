package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/uuid7"
	"github.com/ultimat3/jobs/store"
)

// Child runs (jobs.Job.StartChild). The child is an ordinary run, created by the parent's
// durable enqueue (effects.go) and linked to it in the store. A parent that waits for it
// registers an ordinary event wait for the engine's own event jobs.ChildEvent, matched on the
// child's run id; the engine publishes that event when the child finishes. The event machinery
// is what makes the wait durable, race-free and workerless: the publish and the wait's
// registration are serialised by the store, and a child that finished just before the wait was
// registered is found in the lookback window. A child that finished longer ago is answered from
// its row before the wait is registered (childOutcome).

// enqueuedByRun begins the EnqueuedBy of a run enqueued by the durable call of another run. A
// filter only (childFinished reads no link for a run whose EnqueuedBy does not begin so): any
// caller may write it, so it never decides a link.
const enqueuedByRun = "run:"

// callRunKey carries, in an enqueue's context, the id of the durable call (callID) that
// enqueues: the run it creates gets an id seeded by the call (uuid7.Seeded), which no caller can
// choose, so the engine can tell later that the call made it.
type callRunKey struct{}

// runIDFor is the id of a run created at now: seeded by the durable call enqueueing it, if any.
func runIDFor(ctx context.Context, now time.Time) string {
	if call, ok := ctx.Value(callRunKey{}).(string); ok {
		return uuid7.Seeded(now, call)
	}
	return uuid7.New(now)
}

// linkChild links the run an enqueue returned to the parent. A run the enqueue found live under
// its key, started by someone else, is not the parent's to link (it would be cancelled with a
// parent it never had): only a run this call created is linked, which its id says (runIDFor,
// seeded by the call's id: callIDIn). Its EnqueuedBy ("run:<parent>") says the same but
// proves nothing: it is attribution, which any caller may write.
func (e *Engine) linkChild(ctx context.Context, parentID, name, id string, res jobs.EnqueueResult, detached bool) error {
	if res.RunID == "" {
		return nil // staged in a transaction: there is no run to link (not reached from a run)
	}
	if res.Deduped && !uuid7.HasSeed(res.RunID, id) {
		return nil
	}
	_, err := e.store.ChildLinkAdd(ctx, store.ChildLink{ParentID: parentID, ChildID: res.RunID, Name: name,
		Detached: detached, CreatedAt: e.clock.Now()})
	return err
}

// childOutcome checks that childID is the parent's child and returns its outcome, encoded, when
// it already finished. A child on its way has no outcome yet: nil, unless an operator retried it
// after an earlier finish, whose outcome the engine published and the event log keeps for the
// lookback window. Then it returns a pending mark instead (a ChildOutcome with no State, and the
// Life the child is in), so that the wait awaitChildMutation registers matches only an outcome
// of that life.
func (e *Engine) childOutcome(ctx context.Context, parentID, childID string) ([]byte, error) {
	if err := e.checkChild(ctx, parentID, childID); err != nil {
		return nil, err
	}
	child, err := e.store.RunGet(ctx, childID)
	if err != nil {
		return nil, err
	}
	if !child.State.Finished() {
		// Read after the row: a retry since the read is seen, and the wait is for the life the
		// child is in now.
		life, _, err := e.childLife(ctx, childID, 0)
		if err != nil || life == 0 {
			return nil, err
		}
		return jobs.Encode(jobs.ChildOutcome{RunID: childID, Life: life})
	}
	var reason string
	if child.State == store.StateCancelled {
		if _, reason, err = e.childLife(ctx, childID, child.LastSeq); err != nil {
			return nil, err
		}
	}
	return encodeOutcome(child, 0, reason)
}

// checkChild refuses (X_NOT_CHILD) a childID that is not parentID's child run.
func (e *Engine) checkChild(ctx context.Context, parentID, childID string) error {
	l, ok, err := e.store.ParentOf(ctx, childID)
	if err != nil {
		return err
	}
	if !ok || l.ParentID != parentID {
		return jobs.Errorf(jobs.CodeNotChild, "run %s: run %s is not its child", parentID, childID)
	}
	return nil
}

// childLife reads from a child's history what its row does not say: the seq of the RunRetried
// that began its current life (0: it was never retried), and the reason of the cancel that ended
// it, if one did ("" when it names none). A retry keeps no reason of an earlier cancel. upTo > 0
// reads the history only to that seq: the outcome of a row read at upTo is of the life it was in
// then, though an operator may have retried the child since (its history then goes on past it).
func (e *Engine) childLife(ctx context.Context, childID string, upTo int64) (life int64, reason string, err error) {
	events, err := e.store.HistoryRead(ctx, childID, 0, 0)
	if err != nil {
		return 0, "", err
	}
	for _, ev := range events {
		if upTo > 0 && ev.Seq > upTo {
			break
		}
		switch ev.Kind {
		case history.KindRunRetried:
			life, reason = ev.Seq, ""
		case history.KindRunCancelled:
			reason = ""
			if p, derr := ev.Decode(); derr == nil {
				if c, ok := p.(history.RunCancelled); ok {
					reason = c.Reason
				}
			}
		}
	}
	return life, reason, nil
}

// encodeOutcome is a finished child's outcome as its parent hears it, from its row. A cancelled
// child is X_RUN_CANCELLED with the cancel's reason, as WaitResult says: the row of a child
// cancelled while it waited for a retry keeps the failed attempt's error, which is not why it
// ended.
func encodeOutcome(r store.Run, life int64, cancelReason string) ([]byte, error) {
	o := jobs.ChildOutcome{RunID: r.ID, State: string(r.State), Code: r.ErrorCode, Error: r.Error, Life: life}
	switch r.State {
	case store.StateCompleted:
		o.Result = r.Result
	case store.StateCancelled:
		o.Code, o.Error = string(jobs.CodeRunCancelled), cancelReason
	}
	return jobs.Encode(o)
}

// childMatch is the wait's match on the child's run id, in the canonical form events carry, and
// on its life when it was retried (ChildOutcome.Life): an outcome of the child's first life
// carries no life, and is taken by a wait registered before any retry.
func childMatch(childID string, life int64) ([]string, error) {
	if life == 0 {
		return history.MatchKeys(map[string]any{"run_id": childID})
	}
	return history.MatchKeys(map[string]any{"run_id": childID, "life": life})
}

// awaitChildMutation builds the events and transition of CmdAwaitChild (its Effect carried out
// by effects): the wait, and either the outcome at once or a suspension with no timeout. An
// Outcome with no State is childOutcome's pending mark: the child is on its way in that Life.
func (e *Engine) awaitChildMutation(m *store.Mutation, runID string, c frontend.Command, now time.Time) error {
	if c.Effect == nil || c.Effect.RunID == "" {
		return jobs.Errorf(jobs.CodeInvariant, "run %s: await %q was not carried out", runID, c.Name)
	}
	outcome, life := c.Effect.Outcome, int64(0)
	if outcome != nil {
		var o jobs.ChildOutcome
		if err := jobs.Decode(outcome, &o); err != nil {
			return jobs.Wrap(jobs.CodeEncoding, err, "run %s: await %q", runID, c.Name)
		}
		if o.State == "" {
			outcome, life = nil, o.Life
		}
	}
	match, err := childMatch(c.Effect.RunID, life)
	if err != nil {
		return jobs.Wrap(jobs.CodeEncoding, err, "run %s: await %q", runID, c.Name)
	}
	m.Events = append(m.Events, history.New(now, history.EventWaitStarted{WaitName: c.Name, Event: jobs.ChildEvent, Match: match}))
	if outcome != nil {
		m.Events = append(m.Events, history.New(now, history.EventReceived{WaitName: c.Name,
			EventID: childEventID(c.Effect.RunID, "row"), Payload: outcome}))
		return nil
	}
	m.State, m.Sticky = store.StateSuspended, c.Sticky
	m.Wait = &store.Wait{Name: c.Name, Event: jobs.ChildEvent, Match: match, LookbackFrom: now.Add(-e.cfg.Lookback)}
	return nil
}

func childEventID(childID, tag string) string { return history.ChildEventID(childID, tag) }

// childFinished tells a finished run's parent, if it has one, how it finished: a parent waiting
// for it wakes with the outcome. The event id names the child and its history's seq, so telling
// twice is one event, and a child retried and finished again tells again. A failure is logged,
// not returned: the child's own record committed, and its parent is answered from the child's
// row if it waits later (childOutcome).
func (e *Engine) childFinished(ctx context.Context, r store.Run) {
	if !strings.HasPrefix(r.EnqueuedBy, enqueuedByRun) {
		return // not enqueued by a run: no parent, and no store read on the common path
	}
	ctx = context.WithoutCancel(ctx)
	if _, ok, err := e.store.ParentOf(ctx, r.ID); err != nil || !ok {
		if err != nil {
			e.log.Warn("jobs.child.notify-failed", "run", r.ID, "err", err)
		}
		return
	}
	if err := e.tell(ctx, r); err != nil {
		e.log.Warn("jobs.child.notify-failed", "run", r.ID, "err", err)
	}
}

// tell publishes a finished child's outcome for its parent, under an id naming the child and its
// history's seq: telling twice is one event, and a child retried and finished again tells again.
// The outcome names the child's life (childLife), which a wait for a retried child matches on.
func (e *Engine) tell(ctx context.Context, child store.Run) error {
	life, reason, err := e.childLife(ctx, child.ID, child.LastSeq)
	if err != nil {
		return err
	}
	payload, err := encodeOutcome(child, life, reason)
	if err != nil {
		return err
	}
	_, err = e.signals.PublishSystem(ctx, childEventID(child.ID, fmt.Sprint(child.LastSeq)), jobs.ChildEvent, payload)
	return err
}

// cancelled follows a cancel: the cancelled run's parent hears of it, and its children that are
// not detached are cancelled too (their own children after them). A cancel of a run already
// cancelled cascades again, so an operator can finish a cascade an outage cut short.
func (e *Engine) cancelled(ctx context.Context, runID string, run store.Run, err error) {
	switch {
	case err == nil:
		e.childFinished(ctx, run)
		e.logFinished(run)
	case jobs.HasCode(err, jobs.CodeJobNotCancellable):
		r, gerr := e.store.RunGet(ctx, runID)
		if gerr != nil || r.State != store.StateCancelled {
			return
		}
		run = r
	default:
		return
	}
	ctx = context.WithoutCancel(ctx)
	kids, lerr := e.store.ChildrenOf(ctx, runID)
	if lerr != nil {
		e.log.Warn("jobs.child.cancel-failed", "run", runID, "err", lerr)
		return
	}
	for _, k := range kids {
		if k.Detached {
			continue
		}
		child, gerr := e.store.RunGet(ctx, k.ChildID)
		if gerr != nil || child.State.Finished() {
			continue
		}
		if cerr := e.cancelChild(ctx, run, child); cerr != nil {
			e.log.Warn("jobs.child.cancel-failed", "run", k.ChildID, "parent", runID, "err", cerr)
		}
	}
}

// cancelChild cancels a child because its parent was cancelled; a child already finished (or
// cancelled by the other path, below) is not an error.
//
// The parent owns its children, whatever their tenant: a parent may start a child for another
// tenant (a child's tenant is its own input's), and cancelling the parent cancels that child too,
// as the seed's rule says, so no work the parent started runs on under a cancelled parent. The
// reason written into the child's history, which the child's tenant reads, names the parent only
// when both are of one tenant: another tenant's run id is hidden from that tenant everywhere else
// (Family.Scoped, "not found").
func (e *Engine) cancelChild(ctx context.Context, parent, child store.Run) error {
	if _, err := e.Cancel(ctx, child.ID, cascadeReason(parent, child)); err != nil && !jobs.HasCode(err, jobs.CodeJobNotCancellable) {
		return err
	}
	return nil
}

// cascadeReason is the cancel reason of a child cancelled with its parent: it names the parent
// to the parent's own tenant, and to a child of another tenant (or of none, or a parent of none)
// says only that its parent run was cancelled.
func cascadeReason(parent, child store.Run) string {
	if parent.Tenant != child.Tenant || parent.ID == "" {
		return "its parent run was cancelled"
	}
	return "parent " + parent.ID + " was cancelled"
}

// linkedUnderLiveParent runs after a child's link is written: a cancel of the parent that
// committed after the record's claim check (heldRun) may have read the parent's children before
// the link existed, and its cascade then never reaches the child, which runs to its end under a
// cancelled parent. Either the parent's cancel commits after this read, and its cascade reads
// the children after the link was written, or this read sees it and cancels the child itself.
func (e *Engine) linkedUnderLiveParent(ctx context.Context, parentID, childID string) error {
	parent, err := e.store.RunGet(ctx, parentID)
	if err != nil {
		return err
	}
	if parent.State != store.StateCancelled {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	child, err := e.store.RunGet(ctx, childID)
	if err != nil {
		return err
	}
	if err := e.cancelChild(ctx, parent, child); err != nil {
		return err
	}
	return jobs.Errorf(jobs.CodeAborted, "run %s was cancelled", parentID)
}

// Family is a run's place among runs: its parent's link and its children's.
type Family struct {
	Parent   *ChildView  `json:"parent,omitempty"`
	Children []ChildView `json:"children,omitempty"`
}

// ChildView is one parent–child link as the inspect surfaces show it.
type ChildView struct {
	ParentID  string      `json:"parentId"`
	RunID     string      `json:"runId"`
	Name      string      `json:"name"`
	Detached  bool        `json:"detached,omitempty"`
	Job       string      `json:"job,omitempty"`
	State     store.State `json:"state,omitempty"`
	CreatedAt time.Time   `json:"createdAt"`
	// tenant is the linked run's tenant ("" for none), for Scoped; unknown (the run deleted)
	// reads as the empty tenant's.
	tenant string
}

// Scoped is f as a credential scoped to tenant may see it: only the links to that tenant's runs.
// A parent may start a child for another tenant (a child's tenant is its own input's), and the
// link shows the other run's id, job and live state, which that tenant's credential is otherwise
// not shown ("not found").
func (f Family) Scoped(tenant string) Family {
	var out Family
	if f.Parent != nil && f.Parent.tenant == tenant {
		out.Parent = f.Parent
	}
	for _, c := range f.Children {
		if c.tenant == tenant {
			out.Children = append(out.Children, c)
		}
	}
	return out
}

// family reads a run's links; the children's job and state come from their rows.
func (e *Engine) family(ctx context.Context, runID string) (Family, error) {
	var f Family
	l, ok, err := e.store.ParentOf(ctx, runID)
	if err != nil {
		return f, err
	}
	if ok {
		v := ChildView{ParentID: l.ParentID, RunID: l.ChildID, Name: l.Name, Detached: l.Detached, CreatedAt: l.CreatedAt}
		if p, err := e.store.RunGet(ctx, l.ParentID); err == nil {
			v.Job, v.State, v.tenant = p.Job, p.State, p.Tenant
		}
		f.Parent = &v
	}
	kids, err := e.store.ChildrenOf(ctx, runID)
	if err != nil {
		return f, err
	}
	for _, k := range kids {
		v := ChildView{ParentID: k.ParentID, RunID: k.ChildID, Name: k.Name, Detached: k.Detached, CreatedAt: k.CreatedAt}
		if c, err := e.store.RunGet(ctx, k.ChildID); err == nil {
			v.Job, v.State, v.tenant = c.Job, c.State, c.Tenant
		}
		f.Children = append(f.Children, v)
	}
	return f, nil
}

// childSweepEvery is how often the engine looks for parents it may not have told. Telling
// happens after the child's final commit, so an engine that stops in between leaves a parent
// waiting; the sweep (at start, then on this period) tells it. A parent is told at most once per
// child outcome: the event's id names the child and its history's seq.
const childSweepEvery = 30 * time.Second

// childSweepBatch bounds one sweep's reads and publishes.
const childSweepBatch = 500

// TellWaitingParents publishes the outcome of every finished child whose parent still waits on
// a child, and returns how many it told. A child is told of as it is now: one retried since the
// store's read is on its way, and is skipped. Telling a parent that already heard is the same
// event again (a no-op), and an outcome for a child the parent does not wait for only lands in
// the event log, where the parent's later wait for that child finds it.
func (e *Engine) TellWaitingParents(ctx context.Context) (int, error) {
	links, err := e.store.FinishedChildrenOfWaiting(ctx, jobs.ChildEvent, childSweepBatch)
	if err != nil {
		return 0, err
	}
	told := 0
	for _, l := range links {
		child, err := e.store.RunGet(ctx, l.ChildID)
		if err != nil {
			if jobs.HasCode(err, jobs.CodeRunNotFound) {
				continue // deleted by retention since the read
			}
			return told, err
		}
		if !child.State.Finished() {
			continue // retried since the read: it is on its way again, and its old outcome is stale
		}
		if err := e.tell(ctx, child); err != nil {
			return told, err
		}
		told++
	}
	return told, nil
}

// childSweepLoop runs TellWaitingParents at start (the moment after a crash is when a parent
// may be waiting untold) and then every childSweepEvery on the engine's clock.
func (e *Engine) childSweepLoop(ctx context.Context) {
	for {
		if _, err := e.TellWaitingParents(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("jobs.child.sweep-failed", "err", err)
		}
		t := e.clock.NewTimer(childSweepEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}
