package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
)

// Claims commit without waiting for their WAL flush, and fences stay unique across crashes.
//
// A claim is a transaction of its own, and on the hot path it is one claim for every few steps:
// waiting for its flush put one more fsync in the queue that every step commit waits behind. A
// claim can commit asynchronously (synchronous_commit off for its transaction) because nothing
// durable ever depends on it alone: the first write under the claim (a step, a completion, a
// heartbeat's lease) commits synchronously, and a flush covers every WAL record before its own,
// the claim's among them. What a crash can lose is a claim that Postgres had acknowledged and no
// synchronous commit had followed yet. Its run comes back ready, at the fence it had before.
// What that costs: the worker that received the lost claim may be running a step whose record
// has not committed yet, and another worker may claim the run at once instead of after the lease,
// so that step's side effect can run twice, as a worker's crash can make it run twice anyway;
// only one of the two records can land.
//
// With fences bumped by one, the next claim of that run would hand out the lost claim's fence a
// second time, perhaps to another worker, while the worker that received it first is still
// running the body against an engine that outlived the database's restart: fencing would no
// longer tell the two apart. So a fence is also at least its connection's epoch shifted left 32
// bits ({FENCE} in sql.go). Each pooled connection takes the next epoch when it opens
// (afterConnect), by an UPDATE of fence_epoch's one row committed like any other write, and keeps
// it as a session setting that only that server session can see. Every connection open after a
// restart is new (a restart ends every session) and so has a higher epoch than any connection
// before it; every claim after the restart therefore exceeds every fence handed out before it,
// lost or not. The low 32 bits keep counting claims within an epoch: a run would need 2^32
// claims between two restarts to reach the next epoch's range.
//
// A session setting can be lost (RESET ALL, DISCARD ALL, a pooler handing server sessions from
// client to client), and a server session can be one that never ran afterConnect. A claim on such
// a session commits synchronously and takes its floor from the stored epoch plus one, higher than
// any epoch a connection has used; so it too exceeds every fence a lost claim could have had.
// Fences are still bumped by every claim and only compared for equality and order, so nothing
// else changes. SQLite's and the memory store's claims are durable when they return and keep
// counting from one.
//
// During a rolling upgrade from a version before migration 018, an older engine still claims
// synchronously with the fence plus one. Should the server crash then, such a claim can repeat
// the fence of a newer engine's lost claim; the records of the two are still told apart by their
// seqs (every record carries AfterSeq), so a run's history stays linear, and the guarantee is
// whole again once no older engine claims.

// epochSetting is the name of the session setting that holds a connection's epoch: one per
// schema, since a server session behind a pooler may serve stores of several schemas, and an
// epoch is only comparable with the fences of the table it came from. A schema is a lower-case
// identifier (Config.withDefaults), so the name is a valid placeholder setting.
func epochSetting(schema string) string { return "jobs.fence_epoch_" + schema }

// sqlTakeEpoch takes the next epoch and keeps it in the session, in one statement: the setting is
// made by the very transaction that took the epoch, on the same server session, and reverts if
// that transaction does not commit.
const sqlTakeEpoch = `
WITH e AS (UPDATE {S}.fence_epoch SET epoch = epoch + 1 RETURNING epoch)
SELECT set_config({EPOCH}, e.epoch::text, false) FROM e`

// sqlClaimCommit is the setting a claim's transaction commits with: asynchronously on a session
// that holds an epoch, as the session commits otherwise on one that does not.
const sqlClaimCommit = `set_config('synchronous_commit',
	CASE WHEN COALESCE(current_setting({EPOCH}, true), '') = ''
		THEN current_setting('synchronous_commit') ELSE 'off' END, true)`

// CheapClaims implements frontend.CheapClaims: a claim does not wait for its flush (on a session
// that holds an epoch, as the pool's do).
func (s *Store) CheapClaims() bool { return true }

// sqlClaimSettings is the oldest-first claim's settings statement: only how it commits (the fair
// claim's, sqlClaimFairSettings, sets its plan too).
const sqlClaimSettings = `SELECT ` + sqlClaimCommit

// afterConnect makes every pooled connection take an epoch when it opens, after next (the pool's
// own AfterConnect, if any).
func (s *Store) afterConnect(next func(context.Context, *pgx.Conn) error) func(context.Context, *pgx.Conn) error {
	take := s.render(sqlTakeEpoch)
	return func(ctx context.Context, c *pgx.Conn) error {
		if next != nil {
			if err := next(ctx, c); err != nil {
				return err
			}
		}
		if _, err := c.Exec(ctx, take); err != nil {
			return jobs.Wrap(jobs.CodeDriverUnavailable, err, "postgres: take a fence epoch")
		}
		return nil
	}
}
