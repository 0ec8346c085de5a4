// Package outbox is transactional enqueue for applications whose transaction is not the engine's:
// the enqueue is staged as a row in the application's own database, inside the caller's
// transaction, and a Relay publishes committed rows to the engine. The job is enqueued if and only
// if the caller commits, whatever happens between the commit and the publish.
//
// When the application's Postgres IS the engine's store, SameDB writes the run itself in the
// caller's transaction instead, and no relay is needed.
//
// Three pieces, all needed in a process that stages:
//
//	DDL (PostgresDDL / SQLiteDDL) or Migrate  the outbox table, in the application's database
//	New(Config{Store, Direct, Mode})          the Outbox an enqueue stages through
//	NewRelay(RelayConfig{Store, Publisher})   publishes staged rows, started and stopped with the app
//
// Rows are published in (staged_at, id) order and the engine creates at most one run per row
// (the row's id is the enqueue's dedupe id), so a relay that crashes between publishing a row and
// marking it published republishes it harmlessly, even after the first run finished. A row the
// engine refuses for good (a terminal code) is set aside as failed rather than stop the rows
// behind it: Store.Failed lists such rows, Store.Requeue and Store.Drop act on them. A row the
// relay holds in place (a job or queue no worker declares yet, see Relay) and that no deploy will
// ever declare (a misspelt job name) is set aside by an operator with Store.SetAside.
package outbox

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
)

// Mode says what an enqueue with no transaction in reach does.
type Mode int

const (
	// Fallback (the default) enqueues directly through Config.Direct. It lets a script or a test
	// enqueue with no wiring, and it is a fallback, not the guarantee: a direct enqueue is not
	// tied to any transaction of the caller.
	Fallback Mode = iota
	// Required refuses an enqueue with no transaction in reach: X_OUTBOX_NO_TX.
	Required
)

// Config configures an Outbox.
type Config struct {
	// Store holds the staged rows. Required.
	Store Store
	// Direct enqueues when no transaction is in reach and Mode is Fallback: the engine, or an
	// api.Client. Nil makes every such enqueue X_OUTBOX_NO_TX, as Required does.
	Direct jobs.Enqueuer
	Mode   Mode
	// MaxPayload, when positive, refuses at staging an encoded input over it with
	// X_PAYLOAD_TOO_LARGE, where the caller can still be told. Set it to the engine's MaxPayload
	// (1 MiB by default). 0 checks nothing here: the engine refuses such an input at publish, and
	// the relay sets its row aside as failed. Negative is refused with X_INVARIANT.
	MaxPayload int
	// Clock stamps staged_at. Defaults to the wall clock.
	Clock clock.Clock
}

// Outbox stages enqueues in the caller's transaction. It implements jobs.Enqueuer (the
// transaction comes from the context, see WithTx) and, bound to a transaction with Tx,
// jobs.TxEnqueuer.
type Outbox struct {
	cfg   Config
	guard *stagedGuard // shared by every Outbox on cfg.Clock, so staged_at never goes backwards
}

var _ jobs.Enqueuer = (*Outbox)(nil)

// New returns an Outbox.
func New(cfg Config) (*Outbox, error) {
	if cfg.Store == nil {
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox: no store configured")
	}
	if cfg.Mode != Fallback && cfg.Mode != Required {
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox: unknown mode %d", cfg.Mode)
	}
	if cfg.MaxPayload < 0 {
		return nil, jobs.Errorf(jobs.CodeInvariant, "outbox: MaxPayload must not be negative, got %d", cfg.MaxPayload)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Outbox{cfg: cfg, guard: guardOf(cfg.Clock)}, nil
}

// Enqueue implements jobs.Enqueuer: it stages into the transaction ctx carries (WithTx), or,
// with none, falls back to a direct enqueue (Fallback) or refuses with X_OUTBOX_NO_TX (Required).
func (o *Outbox) Enqueue(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	return o.enqueue(ctx, TxFrom(ctx), req)
}

// Tx binds the outbox to tx, the caller's open transaction: job.EnqueueTx(ctx, ob.Tx(tx), in).
// A nil tx, typed (a nil *MemTx) or not, behaves as Enqueue with no transaction in reach.
func (o *Outbox) Tx(tx Tx) jobs.TxEnqueuer { return bound{o, tx} }

type bound struct {
	o  *Outbox
	tx Tx
}

func (b bound) EnqueueTx(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	return b.o.enqueue(ctx, b.tx, req)
}

func (o *Outbox) enqueue(ctx context.Context, tx Tx, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	if isNil(tx) { // a typed nil (a nil *MemTx) too: see isNil
		if o.cfg.Mode == Required || o.cfg.Direct == nil {
			return jobs.EnqueueResult{}, jobs.Errorf(jobs.CodeOutboxNoTx,
				"enqueue of %q: the outbox requires a transaction and none is in reach", req.Job)
		}
		return o.cfg.Direct.Enqueue(ctx, req)
	}
	// Refuse a bad request now, in the caller's transaction, where the caller can still be
	// told; a row the engine refuses later is set aside as failed, for an operator to handle.
	if err := req.Validate(); err != nil {
		return jobs.EnqueueResult{}, err
	}
	if o.cfg.MaxPayload > 0 && len(req.Input) > o.cfg.MaxPayload {
		return jobs.EnqueueResult{}, jobs.Errorf(jobs.CodePayloadTooLarge, "enqueue of %q: input is %d bytes, the outbox's limit is %d", req.Job, len(req.Input), o.cfg.MaxPayload)
	}
	if req.DedupeID != "" {
		return jobs.EnqueueResult{}, jobs.Errorf(jobs.CodeBadRequest, "enqueue of %q: the outbox names the dedupe id itself", req.Job)
	}
	// A request that names no queue is staged naming none: the engine fills in the job's
	// declared queue when the relay publishes it, as it does for a direct enqueue. Naming
	// "default" here would turn a job declared on another queue into X_JOB_UNDECLARED, which
	// the relay holds in place (see Relay), stopping every row staged after it.
	if req.TraceParent == "" {
		// The relay enqueues later, under its own context: the row keeps the stager's span.
		req.TraceParent, req.TraceState = jobs.TraceContext(ctx)
	}
	row := Row{Request: req, StagedAt: o.stagedAt()}
	row.ID = newID(row.StagedAt)
	if err := o.cfg.Store.Stage(ctx, tx, []Row{row}); err != nil {
		return jobs.EnqueueResult{}, err
	}
	// The run does not exist yet: it is created when the relay publishes the committed row.
	return jobs.EnqueueResult{Staged: row.ID}, nil
}

// stagedAt is the clock's time, never earlier than the last one handed out on that clock in this
// process (at microsecond resolution, which is what Postgres keeps), so rows staged in order keep
// that order even when the wall clock steps back between them.
func (o *Outbox) stagedAt() time.Time {
	now := o.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	g := o.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Before(g.last) {
		now = g.last
	}
	g.last = now
	return now
}

// stagedGuard is the newest staged_at handed out on one clock.
type stagedGuard struct {
	mu   sync.Mutex
	last time.Time
}

// stagedGuards holds a guard per clock for the whole process, not per Outbox: an application may
// run several outboxes (one Required, one Fallback, say) that stage into one transaction, and a
// guard of each one's own would let the second's row, stamped after the wall clock stepped back,
// sort ahead of the first's. The guard is per clock rather than one for the process because a
// clock other than the wall clock (a test's fake, set to another day) is another timeline: its
// times say nothing about the wall clock's, and one guard for both would stamp every row with the
// later of the two.
var stagedGuards = struct {
	mu sync.Mutex
	by map[clock.Clock]*stagedGuard
}{by: map[clock.Clock]*stagedGuard{}}

// guardOf returns c's guard, kept for the life of the process (an application has one clock, or a
// few). A clock value that cannot be compared (one holding a slice, a map or a func) cannot be
// told the same as another Outbox's, so its Outbox gets a guard of its own.
func guardOf(c clock.Clock) *stagedGuard {
	if !reflect.ValueOf(c).Comparable() {
		return &stagedGuard{}
	}
	stagedGuards.mu.Lock()
	defer stagedGuards.mu.Unlock()
	g := stagedGuards.by[c]
	if g == nil {
		g = &stagedGuard{}
		stagedGuards.by[c] = g
	}
	return g
}

var (
	idSeq    atomic.Uint64
	idSuffix = func() uint32 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return binary.BigEndian.Uint32(b[:])
	}()
)

// newID is a row id that sorts by time and, within this process, strictly by creation: the
// millisecond, then a process-wide counter, then a random suffix that keeps processes apart.
func newID(t time.Time) string {
	return fmt.Sprintf("%012x-%016x-%08x", uint64(t.UnixMilli()), idSeq.Add(1), idSuffix)
}

// DedupeID is the dedupe id a row is published under.
func DedupeID(rowID string) string { return "outbox:" + rowID }
