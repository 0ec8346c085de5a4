package backfill

import (
	"context"
	"log/slog"
)

// MigrationLedger answers whether the application applied a migration. Package
// backfill/migrations reads golang-migrate's and goose's tables over database/sql or pgx.
type MigrationLedger interface {
	Applied(ctx context.Context, id string) (bool, error)
}

// MigrationState reads id from l: an error reading it is MigrationUnknown, never a refusal.
func MigrationState(ctx context.Context, l MigrationLedger, id string) Migration {
	if l == nil || id == "" {
		return MigrationUnknown
	}
	ok, err := l.Applied(ctx, id)
	if err != nil {
		slog.Default().Warn("jobs.backfill.migrations-unreadable", "migration", id, "err", err)
		return MigrationUnknown
	}
	if ok {
		return MigrationApplied
	}
	return MigrationPending
}
