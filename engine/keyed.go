package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
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
// looser limit, or none, cannot loosen it). Declarations keyed by different keys are all
// enforced, one slot or count per key: a declaration keyed by another field cannot replace
// another's limit (a cap of one per run id never binds, and would otherwise have replaced two
// per customer). Of the declarations of one key, the smallest cap holds, and every rate that
// no other covers (keyedRates).
// Enforced at claim, after the job cap:
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

// keyedState is the engine's memory of the keyed limits: the keyed slots each recently claimed
// run holds (none when its keys do not count it), so a heartbeat renews them without reading the
// run.
type keyedState struct {
	once   sync.Once
	slots  *lru.Cache[string, heldSlots]
	pruned atomic.Int64
}

// heldSlots are the keyed slots a run holds, under the caps named by of (capsOf): a change of
// the declared caps makes the engine work them out again from the run.
type heldSlots struct {
	of    string
	slots []keyedSlot
}

func (k *keyedState) cache() *lru.Cache[string, heldSlots] {
	k.once.Do(func() { k.slots, _ = lru.New[string, heldSlots](16384) })
	return k.slots
}

// keyedCaps are job's keyed concurrency caps: for each key some current declaration caps by, the
// smallest limit declared for it; ordered by key, so every engine takes a run's slots in one
// order. Nil for none.
func (f *fleet) keyedCaps(job string) []*jobs.KeyedLimit {
	return f.keyedLimits(job, func(c jobs.JobDeclaration) *jobs.KeyedLimit {
		if k := c.KeyedConcurrency; k != nil && k.Limit >= 1 {
			return k
		}
		return nil
	}, func(a, b jobs.KeyedLimit) bool { return a.Limit < b.Limit })
}

// keyedRates are job's keyed rate limits: of the rates current declarations limit by, every one
// that no other of the same key covers (as few starts or fewer, in a period as long or longer);
// ordered by key and, within a key, longest period first. Nil for none.
//
// Rates of one key with different periods all hold. Two such rates need not be comparable: 1
// start per minute allows 60 an hour, 59 per hour allows 59 in one minute. One chosen as the
// "slowest" alone (59 per hour) let a declaration loosen another's limit, the burst it bounds.
func (f *fleet) keyedRates(job string) []*jobs.KeyedLimit {
	var all []*jobs.KeyedLimit
	for _, d := range f.jobs[job] {
		if k := d.cfg.KeyedRate; len(d.workers) > 0 && k != nil && k.Limit >= 1 && k.Per > 0 {
			all = append(all, k)
		}
	}
	slices.SortFunc(all, func(a, b *jobs.KeyedLimit) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), cmp.Compare(b.Per, a.Per), cmp.Compare(a.Limit, b.Limit))
	})
	// In that order a rate that covers another comes before it.
	out := all[:0]
	for _, k := range all {
		covered := false
		for _, c := range out {
			if c.Key == k.Key && c.Limit <= k.Limit && c.Per >= k.Per {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, k)
		}
	}
	return out
}

// keyedLimits picks, per key, the tightest of the limits that limit returns from job's current
// declarations.
func (f *fleet) keyedLimits(job string, limit func(jobs.JobDeclaration) *jobs.KeyedLimit, tighter func(a, b jobs.KeyedLimit) bool) []*jobs.KeyedLimit {
	var out []*jobs.KeyedLimit
	for _, d := range f.jobs[job] {
		k := limit(d.cfg)
		if len(d.workers) == 0 || k == nil {
			continue
		}
		i := 0
		for i < len(out) && out[i].Key < k.Key {
			i++
		}
		switch {
		case i < len(out) && out[i].Key == k.Key:
			if tighter(*k, *out[i]) {
				out[i] = k
			}
		default:
			out = append(out, nil)
			copy(out[i+1:], out[i:])
			out[i] = k
		}
	}
	return out
}

// capsOf names a set of keyed caps, their keys and limits (heldSlots.of).
func capsOf(caps []*jobs.KeyedLimit) string {
	var b strings.Builder
	for _, k := range caps {
		b.WriteString(k.Key)
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(k.Limit))
		b.WriteByte(0)
	}
	return b.String()
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

// keyedSlotKey is the slot row of one value of a job's keyed cap, for a run of tenant ("" for
// none). The job is quoted, so no pair of job and value can spell another pair's key.
func keyedSlotKey(job string, k *jobs.KeyedLimit, tenant, value string) string {
	return "key:" + strconv.Quote(job) + ":" + tenantScope(k, tenant) + k.Key + "=" + value
}

// rateKey is the rate log's key of one value of a job's keyed rate, for a run of tenant. A log
// counts starts over one period, so each period of a key has a log of its own: the key's longest
// (longest true, keyedRates' first of the key) keeps the key it always had, so its counts carry
// over, and a shorter one's key names its period after the job. A period begins with a digit,
// which neither the tenant scope ("@") nor a key form does, so the two forms cannot meet.
func rateKey(job string, k *jobs.KeyedLimit, tenant, value string, longest bool) string {
	per := ""
	if !longest {
		per = k.Per.String() + ":"
	}
	return "rate:" + strconv.Quote(job) + ":" + per + tenantScope(k, tenant) + k.Key + "=" + value
}

// maxScopedTenant is the longest tenant a key names as it is; a longer one is named by its
// digest, so that the tenant adds at most a few dozen bytes to a key (Postgres indexes the key,
// and an index entry is bounded).
const maxScopedTenant = 64

// tenantScope is the part of a keyed limit's key that keeps a run of one tenant off another
// tenant's values. A value read from the input is whatever the enqueuer wrote, and the engine
// cannot tell whether it belongs to the run's tenant (the job's tenant function lives in the
// worker): a run enqueued under tenant a whose input names b would otherwise take b's slot, or
// spend b's rate, before the worker refuses it for its tenant (X_JOB_TENANT_MISMATCH). So a
// value of an input key counts per (tenant, value); a run counts only under its own tenant's
// values. A tenant key is the tenant already, and a run of no tenant keeps the key it always
// had. The scope begins with "@", which neither key form does ("tenant", "input."), so a scoped
// key cannot spell an unscoped one; a quoted tenant and a digest ("#") cannot spell each other.
func tenantScope(k *jobs.KeyedLimit, tenant string) string {
	if tenant == "" || k.Key == jobs.KeyTenant {
		return ""
	}
	if len(tenant) > maxScopedTenant {
		sum := sha256.Sum256([]byte(tenant))
		return "@#" + hex.EncodeToString(sum[:]) + ":"
	}
	return "@" + strconv.Quote(tenant) + ":"
}

// inTenant names the tenant a keyed limit's value counts within, for `jobs show`: "" when the
// value is not scoped by one (tenantScope).
func inTenant(k *jobs.KeyedLimit, tenant string) string {
	if tenantScope(k, tenant) == "" {
		return ""
	}
	return " in tenant " + strconv.Quote(tenant)
}

// checkKeyed refuses an enqueue whose run the job's keyed limits cannot count: the input lacks
// the field, holds a value that cannot key, or is sealed by a codec (X_FLOW_KEY). A job no
// worker declared yet has no limits to check against.
func (e *Engine) checkKeyed(ctx context.Context, req jobs.EnqueueRequest) error {
	f, err := e.fleetView(ctx, false)
	if err != nil {
		return err
	}
	for _, k := range append(f.keyedCaps(req.Job), f.keyedRates(req.Job)...) {
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
		kc, kr := f.keyedCaps(r.Job), f.keyedRates(r.Job)
		if len(kc) == 0 && len(kr) == 0 {
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

// admitKeyed takes r's keyed slots and counts its start under each keyed rate; reason is "" when
// r may run, else why not, with the note `jobs show` gives and when r is claimable again. Over
// any one limit, the slots it took are given back. The counts it made stay: a count is the run's
// start, and the same run claimed again is not counted twice (store.RateLimits).
func (e *Engine) admitKeyed(ctx context.Context, r store.Run, kc, kr []*jobs.KeyedLimit) (reason, note string, retry time.Time) {
	now := e.clock.Now()
	var slots []keyedSlot
	giveBack := func() {
		for _, s := range slots {
			e.releaseSlot(ctx, s.key, r.ID)
		}
	}
	for _, k := range kc {
		v, counted := keyValue(k, r)
		if !counted {
			continue
		}
		slot := keyedSlotKey(r.Job, k, r.Tenant, v)
		ok, err := e.store.SlotAcquire(ctx, store.SlotParams{Key: slot, Limit: k.Limit, Holder: r.ID, Now: now, Until: r.LeaseUntil})
		if err != nil || !ok {
			giveBack()
			return handBackKeyCap, fmt.Sprintf("job %q is at its keyed concurrency cap for %s = %s%s (%s, jobs.ConcurrencyBy)",
				r.Job, k.Key, showValue(v), inTenant(k, r.Tenant), k), now.Add(SlotRetry)
		}
		slots = append(slots, keyedSlot{key: slot, cap: k})
	}
	// A start is a run's first claim: nothing recorded yet beyond RunStarted. A retry, or a
	// resume after a sleep or an event, is the same run going on.
	if r.LastSeq <= 1 {
		for i, k := range kr {
			v, counted := keyValue(k, r)
			if !counted {
				continue
			}
			e.pruneRates(ctx, now)
			ok, until, err := e.store.RateTake(ctx, store.RateParams{Key: rateKey(r.Job, k, r.Tenant, v, i == 0 || kr[i-1].Key != k.Key), Holder: r.ID,
				Limit: k.Limit, Per: k.Per, Now: now})
			if err != nil || !ok {
				giveBack()
				if err != nil || !until.After(now) {
					until = now.Add(SlotRetry)
				}
				return handBackKeyRate, fmt.Sprintf("rate limited by %s = %s%s until %s (%s, jobs.RateBy)",
					k.Key, showValue(v), inTenant(k, r.Tenant), until.UTC().Format(time.RFC3339Nano), k), until
			}
		}
	}
	e.keyed.cache().Add(r.ID, heldSlots{of: capsOf(kc), slots: slots})
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

// keyedSlot is one keyed slot a run holds, with the cap it counts under.
type keyedSlot struct {
	key string
	cap *jobs.KeyedLimit
}

// keyedSlotsOf are the keyed slots run runID of job holds: remembered from the claim, or worked
// out from the run. They follow the declared limits and the stored run, whatever a worker says.
func (e *Engine) keyedSlotsOf(ctx context.Context, f *fleet, runID, job string, run *store.Run) ([]keyedSlot, error) {
	kc := f.keyedCaps(job)
	if len(kc) == 0 {
		return nil, nil
	}
	of := capsOf(kc)
	held, ok := e.keyed.cache().Get(runID)
	if !ok || held.of != of {
		if run == nil {
			r, err := e.store.RunGet(ctx, runID)
			if err != nil {
				return nil, err
			}
			run = &r
		}
		held = heldSlots{of: of}
		for _, k := range kc {
			if v, counted := keyValue(k, *run); counted {
				held.slots = append(held.slots, keyedSlot{key: keyedSlotKey(job, k, run.Tenant, v), cap: k})
			}
		}
		e.keyed.cache().Add(runID, held)
	}
	return held.slots, nil
}

// renewKeyed extends the held keyed slots with the lease, as renewSlot does the job's.
func (e *Engine) renewKeyed(ctx context.Context, f *fleet, runID, job string, now time.Time) (renewed bool, err error) {
	slots, err := e.keyedSlotsOf(ctx, f, runID, job, nil)
	if err != nil {
		return false, err
	}
	for _, s := range slots {
		ok, err := e.store.SlotAcquire(ctx, store.SlotParams{Key: s.key, Limit: s.cap.Limit, Holder: runID,
			Now: now, Until: now.Add(e.matching.Lease())})
		if err != nil {
			return false, err
		}
		if !ok {
			return false, jobs.Errorf(jobs.CodeJobSlotLost, "run %s: its slot of %s lapsed and was taken", runID, s.key)
		}
		renewed = true
	}
	return renewed, nil
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
	slots, err := e.keyedSlotsOf(ctx, f, r.ID, r.Job, run)
	if err != nil || len(slots) == 0 {
		return
	}
	for _, s := range slots {
		e.releaseSlot(ctx, s.key, r.ID)
	}
	e.keyed.cache().Remove(r.ID)
}
