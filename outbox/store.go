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
}

// Store keeps staged rows in the application's database. Stage runs on the caller's
// transaction; the others are the relay's, each one statement on the store's own connections.
type Store interface {
	// Stage inserts rows inside tx, the caller's open transaction: they exist if and only if it
	// commits. A tx this store cannot use is X_OUTBOX_NO_TX.
	Stage(ctx context.Context, tx Tx, rows []Row) error

	// Claim takes up to limit unpublished rows for relay, in (staged_at, id) order, and stamps
	// claimed_by = relay and claimed_at = now in the statement that locks them: it is a claim,
	// not a read. A row another relay claimed after now-lease is held: the claim stops at the
	// first held row, so a later row never overtakes an earlier one that is in flight
	// elsewhere. A held row whose claim lapsed (its relay died) is taken over.
	Claim(ctx context.Context, relay string, now time.Time, lease time.Duration, limit int) ([]Row, error)

	// MarkPublished retires the rows of ids that relay still holds; it returns how many. A relay
	// whose claim lapsed and was taken over holds nothing, so its late mark is a no-op.
	MarkPublished(ctx context.Context, relay string, ids []string, now time.Time) (int, error)

	// Release hands back the rows of ids that relay still holds, at once (no lease wait); it
	// returns how many. Like MarkPublished it matches on the claimant.
	Release(ctx context.Context, relay string, ids []string) (int, error)

	// Backlog returns how many rows are unpublished and the StagedAt of the oldest (zero when
	// none), for the relay's metrics.
	Backlog(ctx context.Context) (n int, oldest time.Time, err error)
}
