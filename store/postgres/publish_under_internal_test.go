package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// A run's publish (PublishParams.Under) under READ COMMITTED: a cancel of the run that has
// written the run's row and not yet committed when the publish checks the run is waited for,
// and then seen. Read without the row's lock, the publish would see the run still running, and
// the event would be out for a run whose record is refused.
func TestPublishUnderWaitsForACancelInFlight(t *testing.T) {
	s := OpenTest(t, Config{})
	ctx := t.Context()
	r := runningRuns(t, s, 1, 1, "q")[0]

	conn, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var cancelPID int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&cancelPID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+pgx.Identifier{s.schema, "runs"}.Sanitize()+
		` SET state = 'cancelled', worker_id = '' WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}

	const eventID = "00000000-0000-7000-9000-000000000001"
	done := make(chan error, 1)
	go func() {
		_, err := s.RunPublish(ctx, store.PublishParams{ID: eventID, Name: "e", Now: t0,
			Under: &store.Lease{RunID: r.ID, Fence: r.Fence}})
		done <- err
	}()
	// Commit the cancel only once the publish waits for it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the publish returned (%v) while a cancel of its run was in flight: it did not wait for the run's row", err)
		default:
		}
		var blocked int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
			cancelPID).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
		if blocked > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the publish neither returned nor waited for the cancel in flight")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !jobs.HasCode(err, jobs.CodeAborted) {
		t.Fatalf("publish under the claim of a run cancelled meanwhile: %v, want %s", err, jobs.CodeAborted)
	}
	var kept int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{s.schema, "events"}.Sanitize()+` WHERE id = $1`,
		eventID).Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept != 0 {
		t.Errorf("the refused publish kept its event")
	}
}
