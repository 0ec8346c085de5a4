package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
)

// Keyed limits (jobs.ConcurrencyBy, jobs.RateBy): fleet-wide limits per value of a key the
// engine reads itself, the run's tenant or a field of its stored input. The limits are the
// declared ones: of every current declaration of a job, the tightest (a worker that declares a
// looser limit, or none, cannot loosen it). Enforced at claim, after the job cap:
//   - the keyed cap takes a slot row keyed by the job and the key's value, expiring with the
//     lease, renewed by heartbeats and released when the run leaves running, like the job cap;
//   - the keyed rate counts the run's first start in the store's sliding log (store.RateLimits),
//     so a restart of the engine grants no fresh allowance.
//
// Over either the claim is handed straight back (delayed, no attempt spent): over the cap for
// SlotRetry, over the rate until the store says room comes back, so neither spins.

// Hand-back reasons of the keyed limits (metric labels).
const (
	handBackKeyCap  = "key_cap"
	handBackKeyRate = "key_rate"
)

// ratePruneEvery bounds how often rate takes pay for deleting lapsed counts.
const ratePruneEvery = time.Minute

// unreadableKey is the value a run whose key cannot be read at claim counts under. Enqueues are
// refused when the key cannot be read, so only runs enqueued before the limit was declared land
// here; counting them together keeps the limit a limit.
const unreadableKey = "\x00unreadable"

// keyedState is the engine's memory of the keyed limits: the keyed slot each recently claimed
// run holds ("" when its key does not count), so a heartbeat renews it without reading the run.
type keyedState struct {
	once   sync.Once
	slots  *lru.Cache[string, string]
	pruned atomic.Int64
}

func (k *keyedState) cache() *lru.Cache[string, string] {
	k.once.Do(func() { k.slots, _ = lru.New[string, string](16384) })
	return k.slots
}

// keyedCap is job's keyed concurrency cap: of the current declarations that hold one, the one
// with the smallest limit (ties: the first key in order), nil for none.
func (f *fleet) keyedCap(job string) *jobs.KeyedLimit {
	var out *jobs.KeyedLimit
	for _, d := range f.jobs[job] {
		k := d.cfg.KeyedConcurrency
		if len(d.workers) == 0 || k == nil || k.Limit < 1 {
			continue
		}
		if out == nil || k.Limit < out.Limit || (k.Limit == out.Limit && k.Key < out.Key) {
			out = k
		}
	}
	return out
}

// keyedRate is job's keyed rate limit: of the current declarations that hold one, the slowest
// (the smallest limit per period), nil for none.
func (f *fleet) keyedRate(job string) *jobs.KeyedLimit {
	var out *jobs.KeyedLimit
	for _, d := range f.jobs[job] {
		k := d.cfg.KeyedRate
		if len(d.workers) == 0 || k == nil || k.Limit < 1 || k.Per <= 0 {
			continue
		}
		if out == nil || slower(*k, *out) || (!slower(*out, *k) && k.Key < out.Key) {
			out = k
		}
	}
	return out
}

// slower reports whether a allows fewer starts per unit of time than b.
func slower(a, b jobs.KeyedLimit) bool {
	return float64(a.Limit)/float64(a.Per) < float64(b.Limit)/float64(b.Per)
}

// checkKeyedDeclaration refuses keyed limits the engine could not enforce.
func checkKeyedDeclaration(name string, c jobs.JobDeclaration) error {
	if k := c.KeyedConcurrency; k != nil {
		if err := k.Validate("job " + strconv.Quote(name) + " concurrencyBy"); err != nil {
			return err
		}
		if k.Per != 0 {
			return jobs.Errorf(jobs.CodeJobDefinition, "job %q: concurrencyBy has a period; a rate is rateBy", name)
		}
	}
	if k := c.KeyedRate; k != nil {
		if err := k.Validate("job " + strconv.Quote(name) + " rateBy"); err != nil {
			return err
		}
		if k.Per <= 0 {
			return jobs.Errorf(jobs.CodeJobDefinition, "job %q: rateBy needs a positive period, got %s", name, k.Per)
		}
	}
	return nil
}

// keyedSlotKey is the slot row of one value of a job's keyed cap. The job is quoted, so no pair
// of job and value can spell another pair's key.
func keyedSlotKey(job string, k *jobs.KeyedLimit, value string) string {
	return "key:" + strconv.Quote(job) + ":" + k.Key + "=" + value
}

// rateKey is the rate log's key of one value of a job's keyed rate.
func rateKey(job string, k *jobs.KeyedLimit, value string) string {
	return "rate:" + strconv.Quote(job) + ":" + k.Key + "=" + value
}

// checkKeyed refuses an enqueue whose run the job's keyed limits cannot count: the input lacks
// the field, holds a value that cannot key, or is sealed by a codec (X_FLOW_KEY). A job no
// worker declared yet has no limits to check against.
func (e *Engine) checkKeyed(ctx context.Context, req jobs.EnqueueRequest) error {
	f, err := e.fleetView(ctx, false)
	if err != nil {
		return err
	}
	for _, k := range []*jobs.KeyedLimit{f.keyedCap(req.Job), f.keyedRate(req.Job)} {
		if k == nil {
			continue
		}
		if _, _, err := jobs.KeyValue(k.Key, req.Tenant, req.NoTenant, req.Input); err != nil {
			msg := err.Error()
			var je *jobs.Error
			if errors.As(err, &je) {
				msg = je.Message
			}
			return jobs.Errorf(jobs.CodeFlowKey, "enqueue of %q (limited to %s): %s", req.Job, k, msg)
		}
	}
	return nil
}

// keyValue is the value r counts under for k; counted is false when k does not count r (a tenant
// key and a run of no tenant).
func keyValue(k *jobs.KeyedLimit, r store.Run) (value string, counted bool) {
	v, counted, err := jobs.KeyValue(k.Key, r.Tenant, r.NoTenant, r.Input)
	if err != nil {
		return unreadableKey, true
	}
	return v, counted
}

func showValue(v string) string {
	if v == unreadableKey {
		return "(unreadable)"
	}
	return strconv.Quote(v)
}

// takeKeyed admits each claimed run under its job's keyed limits, or hands it back. Runs whose
// job has none pass untouched.
func (e *Engine) takeKeyed(ctx context.Context, f *fleet, runs []store.Run) []store.Run {
	kept := runs[:0]
	var back []store.Mutation
	for _, r := range runs {
		kc, kr := f.keyedCap(r.Job), f.keyedRate(r.Job)
		if kc == nil && kr == nil {
			kept = append(kept, r)
			continue
		}
		reason, note, retry := e.admitKeyed(ctx, r, kc, kr)
		if reason == "" {
			kept = append(kept, r)
			continue
		}
		if f.cap(r.Job) > 0 {
			e.releaseSlot(ctx, frontend.SlotKey(r.Job), r.ID) // taken by takeSlots just before
		}
		e.handedBack(r, reason, note)
		back = append(back, store.Mutation{RunID: r.ID, Fence: r.Fence, Now: e.clock.Now(),
			Transition: store.Transition{State: store.StateDelayed,
				Timers: []store.Timer{{Key: timerHand, DueAt: retry}}}})
	}
	if len(back) > 0 {
		if _, err := e.store.RunApply(ctx, back); err != nil {
			e.log.Warn("jobs.keyed.hand-back-failed", "runs", len(back), "err", err)
		}
		e.timers.Kick()
	}
	return kept
}

// admitKeyed takes r's keyed slot and counts its start; reason is "" when r may run, else why
// not, with the note `jobs show` gives and when r is claimable again.
func (e *Engine) admitKeyed(ctx context.Context, r store.Run, kc, kr *jobs.KeyedLimit) (reason, note string, retry time.Time) {
	now := e.clock.Now()
	slot := ""
	if kc != nil {
		if v, counted := keyValue(kc, r); counted {
			slot = keyedSlotKey(r.Job, kc, v)
			ok, err := e.store.SlotAcquire(ctx, store.SlotParams{Key: slot, Limit: kc.Limit, Holder: r.ID, Now: now, Until: r.LeaseUntil})
			if err != nil || !ok {
				return handBackKeyCap, fmt.Sprintf("job %q is at its keyed concurrency cap for %s = %s (%s, jobs.ConcurrencyBy)",
					r.Job, kc.Key, showValue(v), kc), now.Add(SlotRetry)
			}
		}
	}
	e.keyed.cache().Add(r.ID, slot)
	// A start is a run's first claim: nothing recorded yet beyond RunStarted. A retry, or a
	// resume after a sleep or an event, is the same run going on.
	if kr != nil && r.LastSeq <= 1 {
		if v, counted := keyValue(kr, r); counted {
			e.pruneRates(ctx, now)
			ok, until, err := e.store.RateTake(ctx, store.RateParams{Key: rateKey(r.Job, kr, v), Holder: r.ID,
				Limit: kr.Limit, Per: kr.Per, Now: now})
			if err != nil || !ok {
				if slot != "" {
					e.releaseSlot(ctx, slot, r.ID)
				}
				if err != nil || !until.After(now) {
					until = now.Add(SlotRetry)
				}
				return handBackKeyRate, fmt.Sprintf("rate limited by %s = %s until %s (%s, jobs.RateBy)",
					kr.Key, showValue(v), until.UTC().Format(time.RFC3339Nano), kr), until
			}
		}
	}
	return "", "", time.Time{}
}

// pruneRates deletes lapsed rate counts at most every ratePruneEvery: the takes pay for their
// own upkeep.
func (e *Engine) pruneRates(ctx context.Context, now time.Time) {
	last := e.keyed.pruned.Load()
	if last != 0 && now.UnixNano()-last < int64(ratePruneEvery) {
		return
	}
	if !e.keyed.pruned.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	if _, err := e.store.RatePrune(context.WithoutCancel(ctx), now); err != nil {
		e.log.Warn("jobs.keyed.rate-prune-failed", "err", err)
	}
}

// keyedSlotOf is the keyed slot run runID of job holds ("" when none): remembered from the claim,
// or read from the run. It follows the declared limit and the stored run, whatever a worker says.
func (e *Engine) keyedSlotOf(ctx context.Context, f *fleet, runID, job string, run *store.Run) (string, *jobs.KeyedLimit, error) {
	kc := f.keyedCap(job)
	if kc == nil {
		return "", nil, nil
	}
	if slot, ok := e.keyed.cache().Get(runID); ok && (slot == "" || strings.HasPrefix(slot, keyedSlotKey(job, kc, ""))) {
		return slot, kc, nil
	}
	if run == nil {
		r, err := e.store.RunGet(ctx, runID)
		if err != nil {
			return "", nil, err
		}
		run = &r
	}
	slot := ""
	if v, counted := keyValue(kc, *run); counted {
		slot = keyedSlotKey(job, kc, v)
	}
	e.keyed.cache().Add(runID, slot)
	return slot, kc, nil
}

// renewKeyed extends a held keyed slot with the lease, as renewSlot does the job's.
func (e *Engine) renewKeyed(ctx context.Context, f *fleet, runID, job string, now time.Time) (renewed bool, err error) {
	slot, kc, err := e.keyedSlotOf(ctx, f, runID, job, nil)
	if err != nil || slot == "" {
		return false, err
	}
	ok, err := e.store.SlotAcquire(ctx, store.SlotParams{Key: slot, Limit: kc.Limit, Holder: runID,
		Now: now, Until: now.Add(e.matching.Lease())})
	if err != nil {
		return false, err
	}
	if !ok {
		return false, jobs.Errorf(jobs.CodeJobSlotLost, "run %s: its slot of %s lapsed and was taken", runID, slot)
	}
	return true, nil
}

// releaseKeyed gives r's keyed slot back once it left running. Best-effort, like releaseSlot.
func (e *Engine) releaseKeyed(ctx context.Context, r store.Run) {
	f, err := e.fleetView(ctx, false)
	if err != nil {
		return
	}
	var run *store.Run
	if len(r.Input) > 0 {
		run = &r
	}
	slot, _, err := e.keyedSlotOf(ctx, f, r.ID, r.Job, run)
	if err != nil || slot == "" {
		return
	}
	e.releaseSlot(ctx, slot, r.ID)
	e.keyed.cache().Remove(r.ID)
}
