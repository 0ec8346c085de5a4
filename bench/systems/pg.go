package systems

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
)

// newPool opens a pgx pool of exactly size connections at most. pgxpool's own default
// (max(4, GOMAXPROCS)) would be 4 here and would throttle 32 workers, so every system is given
// the same explicit size.
func newPool(ctx context.Context, url string, size int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if size > 0 {
		cfg.MaxConns = int32(size)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping: %w", err)
	}
	return pool, nil
}

// quietLogger keeps libraries' informational chatter out of the child's output while still
// showing warnings and errors, which end up in the report when a run fails.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
