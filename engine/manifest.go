package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
)

// The manifest: every worker declares what it hosts (its jobs with their resolved config, the
// backfills and schedules it runs, the queues it polls) when it starts and every Resend after.
// The engine persists it in the store and enforces from it, never from what a request says:
//   - an enqueue names a job some worker declared, on a queue it is declared on
//     (X_JOB_UNDECLARED; Config.AllowUndeclared lets deployments enqueue before their workers
//     start, and such a run shows why it waits);
//   - a worker polls only the queues its manifest holds (X_QUEUE_UNDECLARED), and is handed only
//     runs of jobs it declared;
//   - the fleet concurrency cap and the attempts of a job are the declared ones.

// Bounds of a manifest: far above any real worker, and they keep one request's cost bounded.
const (
	maxManifestQueues       = 256
	maxManifestDeclarations = 10_000
	// undeclaredRetry is how long a run claimed by a worker that does not host its job waits
	// before it is claimable again.
	undeclaredRetry = 5 * time.Second
	// fleetMaxAge is how stale the engine's copy of the manifest may be before an enqueue or a
	// poll reads it again; a miss (an unknown job or worker) re-reads at once, at most every
	// fleetMissEvery.
	fleetMaxAge    = 5 * time.Second
	fleetMissEvery = 200 * time.Millisecond
)

// fleet is the engine's copy of the persisted manifest's jobs and workers.
type fleet struct {
	loaded  time.Time
	jobs    map[string][]jobDecl
	workers map[string]store.WorkerRecord
}

// jobDecl is one declaration of a job (one checksum) and the workers whose manifest holds it.
type jobDecl struct {
	checksum string
	cfg      jobs.JobDeclaration
	workers  []store.DeclaredBy
	lastSeen time.Time
}

// fleetState guards the engine's copy.
type fleetState struct {
	mu       sync.Mutex
	cur      *fleet
	lastMiss time.Time
}

// live reports whether a worker last seen at seen still counts at now.
func (e *Engine) live(seen, now time.Time) bool {
	return now.Sub(seen) <= 3*e.cfg.ManifestResend
}

// DeclareManifest implements frontend.Frontend: it checks and persists a worker's manifest.
func (e *Engine) DeclareManifest(ctx context.Context, m frontend.Manifest) (frontend.ManifestResponse, error) {
	if m.WorkerID == "" {
		return frontend.ManifestResponse{}, jobs.Errorf(jobs.CodeBadRequest, "the manifest names no worker")
	}
	if err := jobs.ValidIdentifier("worker id", m.WorkerID); err != nil {
		return frontend.ManifestResponse{}, err
	}
	if len(m.Queues) == 0 || len(m.Queues) > maxManifestQueues {
		return frontend.ManifestResponse{}, jobs.Errorf(jobs.CodeBadRequest, "the manifest of %s names %d queues; want 1 to %d", m.WorkerID, len(m.Queues), maxManifestQueues)
	}
	for _, q := range m.Queues {
		if q == "" {
			return frontend.ManifestResponse{}, jobs.Errorf(jobs.CodeBadRequest, "the manifest of %s names an empty queue", m.WorkerID)
		}
		if err := jobs.ValidIdentifier("queue", q); err != nil {
			return frontend.ManifestResponse{}, err
		}
	}
	if len(m.Declarations) > maxManifestDeclarations {
		return frontend.ManifestResponse{}, jobs.Errorf(jobs.CodeBadRequest, "the manifest of %s holds %d declarations; the limit is %d", m.WorkerID, len(m.Declarations), maxManifestDeclarations)
	}
	p := store.ManifestParams{WorkerID: m.WorkerID, Queues: slices.Clone(m.Queues), Now: e.clock.Now()}
	sort.Strings(p.Queues)
	p.Queues = slices.Compact(p.Queues)
	seen := map[[3]string]bool{}
	for _, d := range m.Declarations {
		if err := d.Validate(); err != nil {
			return frontend.ManifestResponse{}, err
		}
		k := [3]string{d.Kind, d.Name, d.Checksum}
		if seen[k] {
			continue
		}
		seen[k] = true
		if d.Kind == jobs.DeclareJob {
			var cfg jobs.JobDeclaration
			if err := json.Unmarshal(d.Data, &cfg); err != nil {
				return frontend.ManifestResponse{}, jobs.Wrap(jobs.CodeJobDefinition, err, "job %q: its declaration is not a job's configuration", d.Name)
			}
			if err := checkJobDeclaration(d.Name, cfg); err != nil {
				return frontend.ManifestResponse{}, err
			}
			if err := checkKeyedDeclaration(d.Name, cfg); err != nil {
				return frontend.ManifestResponse{}, err
			}
			if cfg.Concurrency > 0 || cfg.KeyedConcurrency != nil {
				if h, ok := e.store.(store.SlotHolder); ok && !h.HoldsSlots() {
					return frontend.ManifestResponse{}, jobs.Errorf(jobs.CodeJobConcurrencyUnenforced,
						"job %q declares a fleet concurrency of %d and this engine's store cannot hold concurrency slots", d.Name, cfg.Concurrency)
				}
			}
		}
		p.Declared = append(p.Declared, store.Declared{Kind: d.Kind, Name: d.Name, Checksum: d.Checksum, Data: d.Data})
	}
	if err := e.store.ManifestPut(ctx, p); err != nil {
		return frontend.ManifestResponse{}, err
	}
	e.fleetState.mu.Lock()
	e.fleetState.cur = nil // read afresh: this worker's manifest is the newest fact
	e.fleetState.mu.Unlock()
	e.warnConflicts(ctx, m.WorkerID, p.Declared)
	return frontend.ManifestResponse{Resend: e.cfg.ManifestResend}, nil
}

// warnConflicts logs, once per disagreement, that this worker declares a job that other current
// workers declare differently (two builds of one name: another queue, other attempts, another
// cap). The engine enforces the tightest of them and the manifest marks the conflict, but a
// deploy that went wrong should be said where operators look: the log, when the second
// declaration arrives. It reads the engine's copy of the fleet, which the put above made stale:
// the read it causes is the one the next enqueue or poll would make anyway. A failed read is not
// the manifest's failure.
func (e *Engine) warnConflicts(ctx context.Context, worker string, declared []store.Declared) {
	var f *fleet
	for _, d := range declared {
		if d.Kind != jobs.DeclareJob {
			continue
		}
		if f == nil {
			var err error
			if f, err = e.fleetView(ctx, false); err != nil {
				return
			}
		}
		var others []string // the checksums other current declarations of the job hold
		for _, jd := range f.jobs[d.Name] {
			if jd.checksum != d.Checksum && len(jd.workers) > 0 {
				others = append(others, jd.checksum)
			}
		}
		if len(others) == 0 {
			continue
		}
		slices.Sort(others)
		key := d.Name + "\x00" + d.Checksum + "\x00" + strings.Join(others, ",")
		if _, seen := e.conflictsSaid.LoadOrStore(key, true); !seen {
			e.log.Warn("jobs.manifest.conflict", "job", d.Name, "worker", worker, "checksum", d.Checksum, "other_checksums", others)
		}
	}
}

// checkJobDeclaration refuses a job configuration the engine would enforce wrongly.
func checkJobDeclaration(name string, c jobs.JobDeclaration) error {
	switch {
	case jobs.ValidIdentifier("job name", name) != nil:
		return jobs.ValidIdentifier("job name", name)
	case c.Queue == "" || jobs.ValidIdentifier("queue", c.Queue) != nil:
		return jobs.Errorf(jobs.CodeJobDefinition, "job %q declares queue %q", name, c.Queue)
	case c.Attempts < 1:
		return jobs.Errorf(jobs.CodeJobDefinition, "job %q declares %d attempts", name, c.Attempts)
	case c.Concurrency < 0:
		return jobs.Errorf(jobs.CodeJobDefinition, "job %q declares a concurrency of %d", name, c.Concurrency)
	}
	return nil
}

// fleetView returns the engine's copy of the manifest, read again when older than fleetMaxAge
// or, when miss is set (the caller did not find what it looked for), at most every
// fleetMissEvery.
func (e *Engine) fleetView(ctx context.Context, miss bool) (*fleet, error) {
	st := &e.fleetState
	st.mu.Lock()
	defer st.mu.Unlock()
	// The copy ages on the wall clock, not the engine's: it is a cache of the store, and a fake
	// clock that stands still must not keep another process's manifests from ever being read.
	now := time.Now()
	if f := st.cur; f != nil && now.Sub(f.loaded) < fleetMaxAge {
		if !miss || now.Sub(st.lastMiss) < fleetMissEvery {
			return f, nil
		}
	}
	if miss {
		st.lastMiss = now
	}
	decls, workers, err := e.store.ManifestRead(ctx, jobs.DeclareJob)
	if err != nil {
		return nil, err
	}
	f := &fleet{loaded: now, jobs: map[string][]jobDecl{}, workers: map[string]store.WorkerRecord{}}
	for _, w := range workers {
		f.workers[w.ID] = w
	}
	for _, d := range decls {
		var cfg jobs.JobDeclaration
		if json.Unmarshal(d.Data, &cfg) != nil {
			continue // refused at declaration; a row that does not read is not enforced from
		}
		f.jobs[d.Name] = append(f.jobs[d.Name], jobDecl{checksum: d.Checksum, cfg: cfg, workers: d.Workers, lastSeen: d.LastSeen})
	}
	st.cur = f
	return f, nil
}

// hosts reports whether worker w's current manifest declares job on queue.
func (f *fleet) hosts(w, job, queue string) bool {
	for _, d := range f.jobs[job] {
		if d.cfg.Queue != queue {
			continue
		}
		for _, by := range d.workers {
			if by.WorkerID == w {
				return true
			}
		}
	}
	return false
}

// cap is the fleet concurrency cap of job: the smallest any current declaration of it holds (a
// rolling deploy that lowers a cap is obeyed at once), 0 for none.
func (f *fleet) cap(job string) int {
	n := 0
	for _, d := range f.jobs[job] {
		if len(d.workers) > 0 && d.cfg.Concurrency > 0 && (n == 0 || d.cfg.Concurrency < n) {
			n = d.cfg.Concurrency
		}
	}
	return n
}

// attempts is the attempt ceiling of job: the largest any current declaration holds, 0 when
// none is declared.
func (f *fleet) attempts(job string) int {
	n := 0
	for _, d := range f.jobs[job] {
		if len(d.workers) > 0 && d.cfg.Attempts > n {
			n = d.cfg.Attempts
		}
	}
	return n
}

// queues lists the queues job is declared on, sorted.
func (f *fleet) queues(job string) []string {
	var out []string
	for _, d := range f.jobs[job] {
		if !slices.Contains(out, d.cfg.Queue) {
			out = append(out, d.cfg.Queue)
		}
	}
	sort.Strings(out)
	return out
}

// resolveQueue checks an enqueue against the manifest and fills in the declared queue when the
// request names none.
func (e *Engine) resolveQueue(ctx context.Context, req *jobs.EnqueueRequest) error {
	f, err := e.fleetView(ctx, false)
	if err != nil {
		return err
	}
	if len(f.jobs[req.Job]) == 0 {
		if f, err = e.fleetView(ctx, true); err != nil {
			return err
		}
	}
	qs := f.queues(req.Job)
	switch {
	case len(qs) == 0:
		if e.cfg.AllowUndeclared {
			return nil
		}
		return jobs.Errorf(jobs.CodeJobUndeclared, "no worker has declared job %q: check the name, start a worker that hosts it, or let the engine accept undeclared jobs (AllowUndeclared, --allow-undeclared)", req.Job)
	case req.Queue == "":
		if len(qs) == 1 {
			req.Queue = qs[0]
		}
	case !slices.Contains(qs, req.Queue) && !e.cfg.AllowUndeclared:
		return jobs.Errorf(jobs.CodeJobUndeclared, "job %q is declared on queue %v, not %q", req.Job, qs, req.Queue)
	}
	if req.Tenant != "" && f.noTenant(req.Job) {
		return jobs.Errorf(jobs.CodeJobTenantMismatch, "enqueue of %q names tenant %q, but the job is declared for no tenant (jobs.NoTenant)", req.Job, req.Tenant)
	}
	return nil
}

// noTenant reports whether every current declaration of job says it has no tenant: a run of it
// that names a tenant would be refused by its worker before its body runs (X_JOB_TENANT_MISMATCH),
// so the engine refuses it at enqueue instead, before it holds its key or a slot. A declaration
// from a build that predates the field reads as tenant-scoped, so during a rolling deploy the
// worker's check is the one that applies.
func (f *fleet) noTenant(job string) bool {
	current := 0
	for _, d := range f.jobs[job] {
		if len(d.workers) == 0 {
			continue
		}
		if !d.cfg.NoTenant {
			return false
		}
		current++
	}
	return current > 0
}

// checkPoll refuses a poll of a queue the worker's manifest does not hold.
func (e *Engine) checkPoll(ctx context.Context, req frontend.PollRequest) (*fleet, error) {
	f, err := e.fleetView(ctx, false)
	if err != nil {
		return nil, err
	}
	polls := func(f *fleet) bool {
		w, ok := f.workers[req.WorkerID]
		if !ok {
			return false
		}
		for _, q := range req.Queues {
			if !slices.Contains(w.Queues, q) {
				return false
			}
		}
		return true
	}
	if !polls(f) {
		if f, err = e.fleetView(ctx, true); err != nil {
			return nil, err
		}
		if !polls(f) {
			if _, ok := f.workers[req.WorkerID]; !ok {
				return nil, jobs.Errorf(jobs.CodeQueueUndeclared, "worker %q has sent no manifest: declare what it hosts before polling", req.WorkerID)
			}
			return nil, jobs.Errorf(jobs.CodeQueueUndeclared, "worker %q polls %v; its manifest declares %v", req.WorkerID, req.Queues, f.workers[req.WorkerID].Queues)
		}
	}
	return f, nil
}

// handBackUndeclared returns the runs whose job the claiming worker hosts, and hands the others
// straight back (delayed by undeclaredRetry, no attempt spent) for a worker that does.
func (e *Engine) handBackUndeclared(ctx context.Context, f *fleet, workerID string, runs []store.Run) []store.Run {
	kept := runs[:0]
	var back []store.Mutation
	now := e.clock.Now()
	for _, r := range runs {
		if f.hosts(workerID, r.Job, r.Queue) {
			kept = append(kept, r)
			continue
		}
		e.handedBack(r, handBackUndeclared, fmt.Sprintf("worker %q does not host job %q on queue %q", workerID, r.Job, r.Queue))
		back = append(back, store.Mutation{RunID: r.ID, Fence: r.Fence, Now: now,
			Transition: store.Transition{State: store.StateDelayed,
				Timers: []store.Timer{{Key: timerHand, DueAt: now.Add(undeclaredRetry)}}}})
	}
	if len(back) > 0 {
		if _, err := e.store.RunApply(ctx, back); err != nil {
			e.log.Warn("jobs.manifest.hand-back-failed", "runs", len(back), "err", err)
		}
		e.timers.Kick()
	}
	return kept
}

// waitingReason says why a run that is not running waits, when the manifest explains it: no
// worker declares its job, or none that is still alive does.
//
// scoped says the same to a caller scoped to the run's tenant, who may not read the fleet's
// manifest: it names the run's own job and queue only, never the queues the job is declared on, a
// declaration's time, a worker, or a limit's size, key or value (scopedHandBack).
func (e *Engine) waitingReason(ctx context.Context, r store.Run) (full, scoped string) {
	if r.State != store.StateReady && r.State != store.StateDelayed {
		return "", ""
	}
	if n := e.handBackNote(r); n != "" {
		return n, scopedHandBack(n, r)
	}
	f, err := e.fleetView(ctx, false)
	if err != nil {
		return "", ""
	}
	now := e.clock.Now()
	var last time.Time
	declared := false
	for _, d := range f.jobs[r.Job] {
		if d.cfg.Queue != r.Queue {
			continue
		}
		declared = true
		for _, by := range d.workers {
			if w, ok := f.workers[by.WorkerID]; ok && e.live(w.LastSeen, now) && slices.Contains(w.Queues, r.Queue) {
				return "", ""
			}
			if by.LastSeen.After(last) {
				last = by.LastSeen
			}
		}
		if d.lastSeen.After(last) {
			last = d.lastSeen
		}
	}
	if !declared {
		if qs := f.queues(r.Job); len(qs) > 0 {
			return "job " + quote(r.Job) + " is declared on queue " + joinQuoted(qs) + ", not " + quote(r.Queue) + ": no worker will claim this run",
				"no worker declares job " + quote(r.Job) + " on queue " + quote(r.Queue) + ": no worker will claim this run"
		}
		none := "no worker has declared job " + quote(r.Job) + ": the run waits until a worker that hosts it starts"
		return none, none
	}
	return "no live worker declares job " + quote(r.Job) + " on queue " + quote(r.Queue) + " (last declared " + last.UTC().Format(time.RFC3339) + ")",
		"no live worker declares job " + quote(r.Job) + " on queue " + quote(r.Queue)
}

// scopedHandBack is a hand-back's note ("reason: detail") as a caller scoped to the run's tenant
// may read it: the reason, then what it means, naming the run's job and queue only. The detail
// it leaves out names a worker, a limit's size, or a keyed limit's key and the value counted.
func scopedHandBack(note string, r store.Run) string {
	reason, _, _ := strings.Cut(note, ": ")
	var why string
	switch reason {
	case handBackJobCap:
		why = "job " + quote(r.Job) + " was at its fleet concurrency cap"
	case handBackKeyCap, handBackKeyRate:
		why = "a keyed limit of job " + quote(r.Job) + " held the run back"
	case "tenant_cap", "tenant_rate", "global_cap":
		why = "a worker's own limits held the run back"
	case handBackUndeclared:
		why = "the worker that claimed it does not host job " + quote(r.Job) + " on queue " + quote(r.Queue)
	default:
		reason, why = handBackOther, "a worker handed the run back"
	}
	return reason + ": " + why + " when this run was last claimed; it is tried again shortly"
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func joinQuoted(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += quote(s)
	}
	return out
}
