// Package scheduler fires cron schedules inside the engine process. Every engine may run one;
// exactly one leads, by a lease row in the store that it acquires and renews at the start of
// every round (a node that lost it finds out at its next round and stops dispatching). Each
// schedule has a durable watermark in the store: a round walks the occurrences after it that are
// due, at most MaxCatchUp of them, the catch-up policy picks which to fire, and the runs are
// created and the watermark advanced in ONE store transaction, which commits only while this
// node still holds the lease and the watermark is where the round read it. Each occurrence's run
// has the idempotency key "<schedule>@<occurrence, RFC 3339 UTC>". So an occurrence is fired
// once, across restarts, failovers and a split brain.
//
// Schedules are declared in code with Define (the zone is a required argument, checked against
// the IANA database) and reach the scheduler through Config.Schedules, a provider called at every
// round: an app embedding the engine returns its declarations; a deployment where workers
// declare schedules remotely plugs a provider that reads them.
package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/promreg"
	"github.com/ultimat3/jobs/store"
)

// Role is the name of the scheduler's lease row.
const Role = "scheduler"

// Provider returns the schedules to run. It is called at every round, so declarations that
// change (a deploy of workers declaring others) are picked up without a restart.
type Provider func(ctx context.Context) ([]Schedule, error)

// Static is a Provider of a fixed list.
func Static(schedules ...Schedule) Provider {
	return func(context.Context) ([]Schedule, error) { return schedules, nil }
}

// Config configures a Scheduler.
type Config struct {
	// Engine creates the runs and gives the store and the clock. Required.
	Engine *engine.Engine
	// Schedules provides the declarations. Nil: none (the scheduler still leads, and the
	// operators' commands answer for an empty list).
	Schedules Provider
	// Interval is the time between two rounds. Defaults to 1s.
	Interval time.Duration
	// Lease is how long a round's lease lasts. A leader that stops renewing (killed, partitioned)
	// is replaced once it lapses. Defaults to 15s; it must exceed Interval.
	Lease time.Duration
	// ID names this node as the lease's holder. Defaults to host-pid-random: unique per process,
	// so a restarted process is a new holder and waits for its predecessor's lease to lapse
	// unless that one released it on SIGTERM.
	ID string
	// Registerer receives the scheduler's metrics (last fire time and missed occurrences per
	// schedule, and whether this node leads). Nil: no metrics.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Scheduler runs the rounds. Start runs them every Interval; Tick runs one now.
type Scheduler struct {
	cfg   Config
	eng   *engine.Engine
	store store.Store
	clock clock.Clock
	log   *slog.Logger

	// round serialises rounds: one dispatch round at a time, whoever calls.
	round sync.Mutex

	mu       sync.Mutex
	leading  bool
	started  bool
	stop     chan struct{}
	done     chan struct{}
	compiled map[string]*compiled // by checksum: a declaration is parsed once
	refused  map[string]bool      // by checksum: a refusal is logged once, not every round

	// clockBehind counts the watermarks this node pulled back (jobs.scheduler.clock-behind).
	clockBehind atomic.Int64
}

// New returns a scheduler; Start runs it.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Engine == nil {
		return nil, jobs.Errorf(jobs.CodeInvariant, "scheduler: Config.Engine is required")
	}
	if cfg.Schedules == nil {
		cfg.Schedules = Static()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.Lease <= cfg.Interval {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "scheduler: the lease (%s) must exceed the interval between rounds (%s)", cfg.Lease, cfg.Interval)
	}
	if cfg.ID == "" {
		cfg.ID = defaultID()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Scheduler{cfg: cfg, eng: cfg.Engine, store: cfg.Engine.Store(), clock: cfg.Engine.Clock(),
		log: cfg.Logger.With("scheduler", cfg.ID), compiled: map[string]*compiled{}, refused: map[string]bool{}}
	if cfg.Registerer != nil {
		if err := registerMetrics(cfg.Registerer, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// registerMetrics serves s's metrics on reg. The schedulers of one engine on one registry (two
// in a process, or one built again) share one collector, a Merge of theirs: the schedules' last
// fire and missed occurrences, which each reads from the store, are served once;
// jobs_scheduler_leader is the sum of theirs, 1 when one of them leads (the process is the node);
// jobs_scheduler_clock_behind_total sums their pull-backs. Adopting the first scheduler's
// collector instead would report the first one's lead whichever leads. A registry serving another
// engine's schedulers, or another series under one of the names, refuses s with X_INVARIANT and
// is left as it was.
func registerMetrics(reg prometheus.Registerer, s *Scheduler) error {
	c := newCollector(s)
	m := promreg.NewMerge(s.eng, c, map[*prometheus.Desc]promreg.Rule{c.lastFire: promreg.Max, c.missed: promreg.Max})
	g := promreg.New(reg)
	promreg.RegisterMerge(g, &m)
	if err := g.Err(); err != nil {
		return jobs.Wrap(jobs.CodeInvariant, err, "scheduler: register the metrics")
	}
	m.Join(s, c)
	return nil
}

func defaultID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ID is this node's holder name.
func (s *Scheduler) ID() string { return s.cfg.ID }

// Leading reports whether this node led at its last round.
func (s *Scheduler) Leading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading
}

// Start runs a round now and then every Interval, until Stop.
func (s *Scheduler) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	s.started = true
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.loop(s.stop, s.done)
	return nil
}

func (s *Scheduler) loop(stop, done chan struct{}) {
	defer close(done)
	// A round is never cut short by Stop: it finishes with its own context.
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if err := s.Tick(ctx); err != nil {
			s.log.Warn("jobs.scheduler.round-failed", "err", err)
		}
		t := s.clock.NewTimer(s.cfg.Interval)
		select {
		case <-t.C():
		case <-stop:
			t.Stop()
			return
		}
	}
}

// Stop drains: no round starts after it, the round in flight finishes, and the lease is
// released (so another node leads at its next round rather than after the lease lapses). It
// returns when all that is done, or when ctx ends.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	started, stop, done := s.started, s.stop, s.done
	s.started = false
	s.mu.Unlock()
	if started {
		close(stop)
		select {
		case <-done:
		case <-ctx.Done():
			// The round in flight goes on, and may renew the lease: the release is done once it
			// ends, or the node would read as leading (jobs_scheduler_leader 1) with no loop left
			// to lead, and hold the lease until it lapsed.
			go func() {
				<-done
				rctx, cancel := context.WithTimeout(context.Background(), s.cfg.Lease)
				defer cancel()
				if err := s.release(rctx, true); err != nil {
					s.log.Warn("jobs.scheduler.release-failed", "err", err)
				}
			}()
			return ctx.Err()
		}
	}
	return s.release(ctx, false)
}

// release hands the lease back when this node leads, and stops it reading as leading. unlessStarted
// leaves it to a Start since (the release after a Stop that ran out of time).
func (s *Scheduler) release(ctx context.Context, unlessStarted bool) error {
	// Hold the round lock: a Tick from elsewhere must not re-acquire after the release.
	s.round.Lock()
	defer s.round.Unlock()
	s.mu.Lock()
	if unlessStarted && s.started {
		s.mu.Unlock()
		return nil
	}
	// Not setLeading: a clean stop hands the lease back, which "released" says; "demoted" is a
	// warning for a leader that lost its lease.
	leading := s.leading
	s.leading = false
	s.mu.Unlock()
	if !leading {
		return nil
	}
	if err := s.store.LeaderRelease(ctx, Role, s.cfg.ID); err != nil {
		return err
	}
	s.log.Info("jobs.scheduler.released")
	return nil
}

func (s *Scheduler) setLeading(v bool) {
	s.mu.Lock()
	was := s.leading
	s.leading = v
	s.mu.Unlock()
	switch {
	case v && !was:
		s.log.Info("jobs.scheduler.leading")
	case !v && was:
		s.log.Warn("jobs.scheduler.demoted")
	}
}

// Tick runs one round now: renew (or take) the lease, and, when leading, fire what is due.
// Tests on a fake clock call it after Advance.
func (s *Scheduler) Tick(ctx context.Context) error {
	s.round.Lock()
	defer s.round.Unlock()
	now := s.clock.Now()
	l, err := s.store.LeaderAcquire(ctx, store.LeaderParams{Role: Role, Holder: s.cfg.ID, Now: now, Until: now.Add(s.cfg.Lease)})
	if err != nil {
		// Unknown: the lease may lapse before the next round, so do not dispatch on it.
		s.setLeading(false)
		return err
	}
	if l.Holder != s.cfg.ID {
		s.setLeading(false)
		return nil
	}
	s.setLeading(true)
	cs, err := s.declared(ctx)
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		return nil
	}
	states, err := s.states(ctx, cs, now)
	if err != nil {
		return err
	}
	for i, c := range cs {
		if err := s.dispatch(ctx, c, states[i]); err != nil {
			if jobs.HasCode(err, jobs.CodeScheduleNotLeader) {
				s.setLeading(false)
				return nil
			}
			s.log.Warn("jobs.scheduler.fire-failed", "schedule", c.Name, "err", err)
		}
	}
	return nil
}

// states returns the state of each schedule, in order, giving those first seen their state at
// now. The read goes first so that a round with nothing new writes nothing but its lease.
func (s *Scheduler) states(ctx context.Context, cs []*compiled, now time.Time) ([]store.ScheduleState, error) {
	all, err := s.store.ScheduleList(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]store.ScheduleState, len(all))
	for _, st := range all {
		byName[st.Name] = st
	}
	var missing []string
	for _, c := range cs {
		if _, ok := byName[c.Name]; !ok {
			missing = append(missing, c.Name)
		}
	}
	if len(missing) > 0 {
		fresh, err := s.store.ScheduleInit(ctx, missing, watermarkOf(now))
		if err != nil {
			return nil, err
		}
		for _, st := range fresh {
			byName[st.Name] = st
		}
	}
	out := make([]store.ScheduleState, len(cs))
	for i, c := range cs {
		out[i] = byName[c.Name]
	}
	return out, nil
}

// watermarkOf is now as a watermark: whole seconds (cron's resolution), which every store keeps
// exactly, so the watermark read back compares equal to the one written.
func watermarkOf(now time.Time) time.Time { return now.UTC().Truncate(time.Second) }

// dispatch fires what is due of one schedule.
func (s *Scheduler) dispatch(ctx context.Context, c *compiled, st store.ScheduleState) error {
	if st.Paused {
		return nil
	}
	now := s.clock.Now()
	if ahead := st.Watermark.Sub(now); ahead > s.aheadTolerance() {
		return s.rewind(ctx, c, st, now, ahead)
	}
	p := walk(c.sched, c.Policy, c.MaxCatchUp, st.Watermark, watermarkOf(now))
	if p.to.IsZero() {
		return nil
	}
	runs := make([]store.CreateRunParams, len(p.fire))
	for i, occ := range p.fire {
		req := c.request(OccurrenceKey(c.Name, occ), "schedule:"+c.Name)
		run, err := s.eng.PrepareRun(ctx, req, now)
		if err != nil {
			return err
		}
		runs[i] = run
	}
	res, ok, err := s.fireOnce(ctx, store.ScheduleFireParams{Name: c.Name, Role: Role, Holder: s.cfg.ID, Now: now,
		From: st.Watermark, To: p.to, LastFire: p.fire[len(p.fire)-1], Missed: p.missed, Runs: runs})
	if !ok {
		return err
	}
	occs := make([]string, len(p.fire))
	for i, o := range p.fire {
		occs[i] = o.In(c.loc).Format(time.RFC3339)
		// An occurrence's key is its schedule's name and instant, which anyone who may enqueue
		// the job can name first: the fire then finds that run live and creates none. The
		// scheduler cannot tell a squatter from a caller who meant it, so it says so.
		if i < len(res) && res[i].Deduped && res[i].Run.EnqueuedBy != runs[i].Run.EnqueuedBy {
			s.log.Warn("jobs.scheduler.key-held", "schedule", c.Name, "occurrence", occs[i], "run", res[i].Run.ID,
				"enqueued_by", res[i].Run.EnqueuedBy)
		}
	}
	s.log.Info("jobs.scheduler.fired", "schedule", c.Name, "occurrences", occs, "missed", p.missed,
		"watermark", p.to.Format(time.RFC3339))
	return nil
}

// fireOnce commits one fire of p. ok is false when it did not: with err nil when the schedule was
// paused or fired meanwhile (the next round reads the new state), else with the error.
func (s *Scheduler) fireOnce(ctx context.Context, p store.ScheduleFireParams) (res []store.CreateRunResult, ok bool, err error) {
	res, err = s.eng.FireSchedule(ctx, p)
	switch {
	case jobs.HasCode(err, jobs.CodeScheduleConflict):
		s.log.Debug("jobs.scheduler.conflict", "schedule", p.Name, "err", err)
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return res, true, nil
}

// aheadTolerance is how far ahead of this node's clock a watermark may be and still be trusted:
// nodes' clocks disagree a little, and a watermark the previous leader left a few seconds ahead
// is only that; walking it back would fire again what that leader fired. Past it, the watermark
// was set by a clock that ran ahead: at least a minute, and at least the lease, the skew between
// nodes the lease already has to absorb.
func (s *Scheduler) aheadTolerance() time.Duration { return max(time.Minute, s.cfg.Lease) }

// rewind pulls a watermark that is ahead of now by more than aheadTolerance back to now. A round
// on a clock that jumped forward (a VM resumed with a stale clock, a bad NTP step) advanced it to
// that clock's now; trusted, it would silence the schedule until real time caught up, up to the
// size of the jump, on every node. Pulled back, the occurrences after the corrected now fire at
// their time. Those the jumped round fired early are fired again at their time: a run of one
// still live dedupes on the occurrence's key, a finished one runs again, as it should have run
// then. The rewind is one fire that creates no runs, under the lease and from the watermark the
// round read, so it is exactly-once like any fire.
func (s *Scheduler) rewind(ctx context.Context, c *compiled, st store.ScheduleState, now time.Time, ahead time.Duration) error {
	to := watermarkOf(now)
	if _, ok, err := s.fireOnce(ctx, store.ScheduleFireParams{Name: c.Name, Role: Role, Holder: s.cfg.ID, Now: now,
		From: st.Watermark, To: to, Rewind: true}); !ok {
		return err
	}
	s.clockBehind.Add(1)
	s.log.Warn("jobs.scheduler.clock-behind", "schedule", c.Name, "watermark", st.Watermark.UTC().Format(time.RFC3339),
		"now", now.UTC().Format(time.RFC3339), "ahead", ahead.Round(time.Second).String(),
		"reason", "a round on a clock that ran ahead set the watermark; it is pulled back to now")
	return nil
}

// request is the enqueue of one of the schedule's runs.
func (c *compiled) request(key, by string) jobs.EnqueueRequest {
	return jobs.EnqueueRequest{Job: c.Job, Queue: c.Queue, Input: c.Input, Key: key, Tenant: c.Tenant,
		NoTenant: c.NoTenant, EnqueuedBy: by}
}

// declared returns the provider's valid schedules, by name. A declaration that is refused, or a
// name declared twice, is logged and left out, and the others run.
func (s *Scheduler) declared(ctx context.Context) ([]*compiled, error) {
	all, _, err := s.declarations(ctx)
	if err != nil {
		return nil, err
	}
	var out []*compiled
	for _, d := range all {
		if d.err == nil {
			out = append(out, d.c)
		}
	}
	return out, nil
}

// declaration is one schedule of the provider: compiled, or refused with err.
type declaration struct {
	s   Schedule
	c   *compiled
	err error
}

// declarations returns every schedule of the provider, by name, with the refusal of the invalid
// ones; byName holds the valid ones.
func (s *Scheduler) declarations(ctx context.Context) ([]declaration, map[string]*compiled, error) {
	list, err := s.cfg.Schedules(ctx)
	if err != nil {
		return nil, nil, err
	}
	count := map[string]int{}
	for _, sc := range list {
		count[sc.Name]++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]*compiled{}
	// The checksums declared now: what is not among them is forgotten below.
	current := make(map[string]bool, len(list))
	out := make([]declaration, 0, len(list))
	for _, sc := range list {
		d := declaration{s: sc}
		sum := sc.Checksum()
		current[sum] = true
		switch {
		case count[sc.Name] > 1:
			d.err = jobs.Errorf(jobs.CodeJobDefinition, "schedule %q is declared %d times; none of them runs", sc.Name, count[sc.Name])
		default:
			c := s.compiled[sum]
			if c == nil {
				c, d.err = sc.compile()
				if d.err == nil {
					s.compiled[sum] = c
				}
			}
			d.c = c
		}
		if d.err != nil {
			if !s.refused[sum] {
				s.refused[sum] = true
				s.log.Warn("jobs.scheduler.refused", "schedule", sc.Name, "err", d.err)
			}
		} else {
			seen[sc.Name] = d.c
		}
		out = append(out, d)
	}
	// Every round reads the declarations again, and one that changed (a deploy that changes an
	// input or a spec, a worker that declares a new input at every start) is a new checksum:
	// kept, every version ever declared stayed parsed and remembered for the life of the
	// process. What is no longer declared is forgotten; declared again, it is parsed again and
	// its refusal logged again.
	maps.DeleteFunc(s.compiled, func(sum string, _ *compiled) bool { return !current[sum] })
	maps.DeleteFunc(s.refused, func(sum string, _ bool) bool { return !current[sum] })
	sort.Slice(out, func(i, j int) bool { return out[i].s.Name < out[j].s.Name })
	return out, seen, nil
}
