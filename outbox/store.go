package outbox

import (
	"context"
	"time"

	"github.com/ultimat3/jobs"
)

// Row is one staged enqueue.
type Row struct {
	// ID is the row's id: time-ordered and, within one process, strictly increasing, so two rows
	// staged in one transaction keep their order even when their StagedAt is equal. It is also
	// the publish's dedupe id ("outbox:" + ID), so the engine creates at most one run per row.
	ID       string
	Request  jobs.EnqueueRequest
	StagedAt time.Time
	// ClaimedBy and ClaimedAt are the relay holding the row, and since when; set by Claim.
	ClaimedBy string
	ClaimedAt time.Time
	// FailedAt, ErrorCode and ErrorMessage are set on a failed row: one the engine refused for
	// good (a terminal code, see Relay), set aside so that the rows behind it go on. Zero on a
	// row still in line. A row Claim hands out with ErrorCode set could not be read back
	// (X_ENCODING): the relay sets it aside without publishing it.
	FailedAt     time.Time
	ErrorCode    jobs.Code
	ErrorMessage string
}

// Store keeps staged rows in the application's database. Stage runs on the caller's
// transaction; the others are the relay's or an operator's, each one statement on the store's
// own connections.
//
// A row is in line (staged, waiting to be published), published, or failed: set aside by a relay
// because the engine refused it for good, or by an operator (SetAside). A failed row is never
// claimed, published or pruned; it stays until an operator requeues it (it goes back to its place
// at the head of the line) or drops it.
type Store interface {
	// Stage inserts rows inside tx, the caller's open transaction: they exist if and only if it
	// commits. A tx this store cannot use is X_OUTBOX_NO_TX.
	Stage(ctx context.Context, tx Tx, rows []Row) error

	// Claim takes up to limit rows in line for relay, in (staged_at, id) order, and stamps
	// claimed_by = relay and claimed_at = now in the statement that locks them: it is a claim,
	// not a read. A row another relay claimed after now-lease is held: the claim stops at the
	// first held row, so a later row never overtakes an earlier one that is in flight
	// elsewhere. A held row whose claim lapsed (its relay died) is taken over. Failed rows are
	// skipped.
	Claim(ctx context.Context, relay string, now time.Time, lease time.Duration, limit int) ([]Row, error)

	// MarkPublished retires the rows of ids that relay still holds; it returns how many. A relay
	// whose claim lapsed and was taken over holds nothing, so its late mark is a no-op.
	MarkPublished(ctx context.Context, relay string, ids []string, now time.Time) (int, error)

	// MarkFailed sets aside the row id that relay still holds, with the refusal's code and
	// message, failed at now; it reports whether relay held it. Like MarkPublished it matches on
	// the claimant.
	MarkFailed(ctx context.Context, relay, id string, code jobs.Code, message string, now time.Time) (bool, error)

	// Release hands back the rows of ids that relay still holds, at once (no lease wait); it
	// returns how many. Like MarkPublished it matches on the claimant.
	Release(ctx context.Context, relay string, ids []string) (int, error)

	// Backlog returns how many rows are in line (unpublished and not failed) and the StagedAt of
	// the oldest (zero when none), for the relay's metrics.
	Backlog(ctx context.Context) (n int, oldest time.Time, err error)

	// Failed lists up to limit failed rows in (staged_at, id) order, with their error, and
	// returns how many there are in all (limit 0 only counts them).
	Failed(ctx context.Context, limit int) (rows []Row, total int, err error)

	// Requeue puts the failed rows of ids back in line, at their place in (staged_at, id) order
	// (so ahead of the rows staged after them), with their error cleared; it returns how many.
	// An id that names no failed row is passed over.
	Requeue(ctx context.Context, ids []string) (int, error)

	// SetAside moves the rows of ids that are in line to failed, with code and message, failed
	// at now, as a relay sets aside a row the engine refused for good; it returns how many. It
	// is the operator's way out for a row the relay holds in place by design (a job or queue no
	// worker declares yet, which a rolling deploy ends) when nothing will ever end it: a job
	// name misspelt at staging. The row is then listed, requeued and dropped as any failed row.
	// An id that names no row in line (failed, published, unknown) is passed over. An empty
	// code is X_BAD_REQUEST and changes nothing. A row a relay is publishing at that moment may
	// still be published: its relay's mark then finds it failed and leaves it so, and a later
	// Requeue publishes it again under the same dedupe id, which the engine answers with the
	// run it already created.
	SetAside(ctx context.Context, ids []string, code jobs.Code, message string, now time.Time) (int, error)

	// Drop deletes the failed rows of ids: their jobs are never enqueued. It returns how many;
	// an id that names no failed row (one in line, or published) is passed over.
	Drop(ctx context.Context, ids []string) (int, error)
}
