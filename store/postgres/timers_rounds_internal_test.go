package postgres

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dueRunsCounter counts TimerFire's first statement (one per round), sent alone or in a batch.
type dueRunsCounter struct{ n atomic.Int64 }

func (c *dueRunsCounter) see(sql string) {
	if strings.Contains(sql, ".timers WHERE due_at <= $1 ORDER BY due_at LIMIT $2") {
		c.n.Add(1)
	}
}

func (c *dueRunsCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.see(d.SQL)
	return ctx
}
func (c *dueRunsCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *dueRunsCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *dueRunsCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.see(d.SQL)
}
func (c *dueRunsCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// A TimerFire whose round was not full (it locked fewer runs than its limit) has read every due
// timer it could take, and ends without a second round that would only find nothing: under a
// stream of wake-ups that empty round was two more round trips between a timer falling due and
// its firing. A full round goes on to the next.
func TestTimerFireEndsAfterARoundThatWasNotFull(t *testing.T) {
	t.Parallel()
	counter := &dueRunsCounter{}
	s, err := open(context.Background(), Config{URL: testURL(t), Schema: FreshSchema(t), MaxConns: 2},
		func(p *pgxpool.Config) { p.ConnConfig.Tracer = counter })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, s.render(`
INSERT INTO {S}.runs (id, job, queue, key, state, created_at, updated_at)
SELECT 'r' || g, 'j', 'q', 'k' || g, 'suspended', now(), now() FROM generate_series(1, 5) g;
INSERT INTO {S}.timers (run_id, key, due_at)
SELECT 'r' || g, 'nap', now() - interval '1 minute' FROM generate_series(1, 5) g`)); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(time.Second)

	// A limit of 2 with five due: one full round reaches the limit, and the call ends there.
	counter.n.Store(0)
	woken, err := s.TimerFire(ctx, now, 2)
	if err != nil || len(woken) != 2 {
		t.Fatalf("TimerFire(limit 2) woke %d runs (%v), want 2", len(woken), err)
	}
	if n := counter.n.Load(); n != 1 {
		t.Fatalf("TimerFire(limit 2) made %d rounds, want 1", n)
	}
	counter.n.Store(0)
	woken, err = s.TimerFire(ctx, now, 512)
	if err != nil || len(woken) != 3 {
		t.Fatalf("TimerFire(limit 512) woke %d runs (%v), want the other 3", len(woken), err)
	}
	if n := counter.n.Load(); n != 1 {
		t.Fatalf("TimerFire woke the 3 due runs in %d rounds, want 1: a round that took fewer runs than its limit has seen everything due", n)
	}
	// Nothing is due now: one round, finding nothing.
	counter.n.Store(0)
	if woken, err = s.TimerFire(ctx, now, 512); err != nil || len(woken) != 0 {
		t.Fatalf("TimerFire with nothing due woke %d (%v)", len(woken), err)
	}
	if n := counter.n.Load(); n != 1 {
		t.Fatalf("TimerFire with nothing due made %d rounds, want 1", n)
	}
}
