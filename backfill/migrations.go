package backfill

import (
	"context"
	"log/slog"

	"github.com/ultimat3/jobs"
)

// MigrationLedger answers whether the application applied a migration. Package
// backfill/migrations reads golang-migrate's and goose's tables over database/sql or pgx.
type MigrationLedger interface {
	Applied(ctx context.Context, id string) (bool, error)
}

// MigrationState reads id from l: an error reading it is MigrationUnknown, never a refusal. An id
// the ledger refuses as malformed (X_BAD_REQUEST: "abc" where golang-migrate and goose number
// their versions) is pending instead: the ledger was read, and it can never show that id
// applied, so the pass it gates must not run before the migration it meant to require.
func MigrationState(ctx context.Context, l MigrationLedger, id string) Migration {
	if l == nil || id == "" {
		return MigrationUnknown
	}
	ok, err := l.Applied(ctx, id)
	if jobs.HasCode(err, jobs.CodeBadRequest) {
		slog.Default().Warn("jobs.backfill.requires-invalid", "migration", id, "err", err)
		return MigrationPending
	}
	if err != nil {
		slog.Default().Warn("jobs.backfill.migrations-unreadable", "migration", id, "err", err)
		return MigrationUnknown
	}
	if ok {
		return MigrationApplied
	}
	return MigrationPending
}
