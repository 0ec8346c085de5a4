package matching

import (
	"context"
	"slices"
	"strings"

	"github.com/ultimat3/jobs/store"
)

// Gathered claims. Every claim is a store transaction (on Postgres a SKIP LOCKED walk, an UPDATE
// and a commit), and the polls of different workers used to claim each on its own: two worker
// processes of 16 slots made twice the claims one process of 32 made for the same runs, and more
// of them empty. Now, while a claim of a set of queues is in flight, the polls of that set that
// arrive gather, and when it ends they make one claim together, split by worker
// (store.ClaimParams.Shares), as the group commit gathers records behind the commit in flight.
//
// The rules that keep it from costing latency or runs:
//   - a poll that finds no claim of its queues in flight claims at once, on its own: a lone
//     worker's claims are what they were. Its claim runs on its context's values but not its
//     cancellation (lone), bounded by the lease as a gathered claim is: a driver whose context
//     is cancelled returns at once while the database may still commit the claim it sent, and
//     the runs would then be held by a poll that returned nothing, until their lease lapsed.
//     The claim's end is always heard instead, and a poll whose caller left returns what it
//     claimed for its caller to hand back (engine.Poll);
//   - a gathered claim starts as soon as the one before it ends, so a poll waits at most one
//     claim longer than it would have (and no longer than that claim's own length);
//   - the polls of one worker in a gathered claim share one share (a worker id is stamped on
//     each run) and split its runs, each up to its Max;
//   - a poll whose caller leaves before its gathered claim starts is taken out of it; once the
//     claim has started, the poll waits for its end and returns what it claimed, as a claim of
//     its own in flight would have committed;
//   - a gathered claim runs on the context of no caller (none of them may cancel the others'
//     claim), bounded by the lease: a claim that outlasts it would hand out leases already lost.

// claimer is one poll's part in a gathered claim.
type claimer struct {
	worker string
	max    int
	runs   []store.Run
	err    error
	done   chan struct{}
}

// gathering is the polls waiting for the claim in flight of their queues to end.
type gathering struct {
	polls []*claimer
	// workers counts the polls of each worker among polls: its length is the claim's shares.
	workers map[string]int
	started bool
}

// inFlight is a set of queues with a claim in flight, and the polls gathered behind it.
type inFlight struct {
	next *gathering
}

// claimKey names a set of queues: polls gather only with polls of the same set.
func claimKey(queues []string) string {
	if len(queues) == 1 {
		return queues[0]
	}
	qs := slices.Clone(queues)
	slices.Sort(qs)
	return strings.Join(slices.Compact(qs), "\x00")
}

// claim claims up to max runs of queues for worker: at once if no claim of the queues is in
// flight, else in the claim gathered behind it.
func (s *Service) claim(ctx context.Context, worker string, queues []string, max int) ([]store.Run, error) {
	key := claimKey(queues)
	s.mu.Lock()
	f := s.flights[key]
	if f == nil {
		s.flights[key] = &inFlight{}
		s.mu.Unlock()
		runs, err := s.lone(ctx, queues, worker, max)
		s.landed(key, queues)
		return runs, err
	}
	g := f.next
	if g == nil {
		g = &gathering{workers: map[string]int{}}
		f.next = g
	}
	if len(g.workers) >= store.MaxShares && g.workers[worker] == 0 {
		// A full gathering: this poll claims beside it, as every poll once did.
		s.mu.Unlock()
		return s.lone(ctx, queues, worker, max)
	}
	c := &claimer{worker: worker, max: max, done: make(chan struct{})}
	g.workers[worker]++
	g.polls = append(g.polls, c)
	s.mu.Unlock()

	select {
	case <-c.done:
		return c.runs, c.err
	case <-ctx.Done():
	}
	s.mu.Lock()
	if !g.started {
		g.remove(c)
		s.mu.Unlock()
		return nil, ctx.Err()
	}
	s.mu.Unlock()
	<-c.done
	return c.runs, c.err
}

func (g *gathering) remove(c *claimer) {
	g.polls = slices.DeleteFunc(g.polls, func(x *claimer) bool { return x == c })
	if g.workers[c.worker]--; g.workers[c.worker] == 0 {
		delete(g.workers, c.worker)
	}
}

// landed is called as a claim of key ends: the polls gathered behind it claim now, together.
func (s *Service) landed(key string, queues []string) {
	s.mu.Lock()
	f := s.flights[key]
	g := f.next
	f.next = nil
	if g == nil || len(g.polls) == 0 {
		delete(s.flights, key)
		s.mu.Unlock()
		return
	}
	g.started = true
	s.mu.Unlock()
	go s.claimGathered(key, queues, g)
}

// claimGathered makes g's claim and hands each poll its runs.
func (s *Service) claimGathered(key string, queues []string, g *gathering) {
	var shares []store.ClaimShare
	at := map[string]int{}
	for _, c := range g.polls {
		i, ok := at[c.worker]
		if !ok {
			i = len(shares)
			at[c.worker] = i
			shares = append(shares, store.ClaimShare{WorkerID: c.worker})
		}
		shares[i].Limit += c.max
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Lease)
	runs, err := s.claimShares(ctx, queues, shares)
	cancel()
	s.landed(key, queues)
	// Each worker's runs, in claim order, go to its polls in the order they came, each up to
	// its Max.
	byWorker := map[string][]store.Run{}
	for _, r := range runs {
		byWorker[r.WorkerID] = append(byWorker[r.WorkerID], r)
	}
	for _, c := range g.polls {
		if err != nil {
			c.err = err
		} else {
			mine := byWorker[c.worker]
			n := min(len(mine), c.max)
			c.runs, byWorker[c.worker] = mine[:n:n], mine[n:]
		}
		close(c.done)
	}
}

// lone is one poll's claim on its own, on ctx's values but not its cancellation, bounded by the
// lease (see the rules above).
func (s *Service) lone(ctx context.Context, queues []string, worker string, max int) ([]store.Run, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Lease)
	defer cancel()
	return s.claimShares(ctx, queues, []store.ClaimShare{{WorkerID: worker, Limit: max}})
}

// claimShares is one store claim for the shares.
func (s *Service) claimShares(ctx context.Context, queues []string, shares []store.ClaimShare) ([]store.Run, error) {
	now := s.cfg.Clock.Now()
	p := store.ClaimParams{
		Queues:       queues,
		Now:          now,
		LeaseUntil:   now.Add(s.cfg.Lease),
		StickyBefore: now.Add(-s.cfg.StickyWindow),
		OldestFirst:  s.cfg.OldestFirst,
		Rotation:     s.currentRotation(),
	}
	if len(shares) == 1 {
		p.WorkerID, p.Limit = shares[0].WorkerID, shares[0].Limit
	} else {
		p.Shares = shares
	}
	runs, err := s.cfg.Store.RunClaim(ctx, p)
	if err != nil {
		return nil, err
	}
	s.rotated(runs)
	return runs, nil
}
