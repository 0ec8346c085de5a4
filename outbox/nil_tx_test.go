package outbox

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ultimat3/jobs"
)

// A transaction variable the caller never assigned, wrapped in an interface (a nil *MemTx, a nil
// *pgxpool.Tx through Pgx, a nil pgx.Tx handed to SameDB) is no transaction: X_OUTBOX_NO_TX, as
// an untyped nil is, never a panic in the caller's request.
func TestATypedNilTransactionIsNoTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	req := jobs.EnqueueRequest{Job: "note", Key: "k", NoTenant: true}

	// The relay's pool is never dialled: the refusal comes before any statement.
	pool, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pg, err := NewPostgresStore(pool, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := NewMemoryStore()

	var memTx *MemTx
	var poolTx *pgxpool.Tx
	var plainTx pgx.Tx = poolTx
	for _, c := range []struct {
		name  string
		store Store
		tx    Tx
	}{
		{"nil *MemTx", mem, memTx},
		{"Pgx(nil *pgxpool.Tx)", pg, Pgx(poolTx)},
	} {
		ob, err := New(Config{Store: c.store, Mode: Required})
		if err != nil {
			t.Fatal(err)
		}
		noPanic(t, c.name+" through Tx", func() error {
			_, err := ob.Tx(c.tx).EnqueueTx(ctx, req)
			return err
		})
		noPanic(t, c.name+" on the context", func() error {
			_, err := ob.Enqueue(WithTx(ctx, c.tx), req)
			return err
		})
		noPanic(t, c.name+" to Store.Stage", func() error {
			return c.store.Stage(ctx, c.tx, []Row{{ID: "r", Request: req}})
		})
	}
	if n, _, _ := mem.Backlog(ctx); n != 0 {
		t.Errorf("the memory store holds %d rows after refusals", n)
	}
	noPanic(t, "SameDB.Tx(nil *pgxpool.Tx)", func() error {
		_, err := (&SameDB{}).Tx(plainTx).EnqueueTx(ctx, req)
		return err
	})
	noPanic(t, "SameDB.BulkTx(nil *pgxpool.Tx)", func() error {
		_, err := (&SameDB{}).BulkTx(plainTx).EnqueueManyTx(ctx, []jobs.EnqueueRequest{req})
		return err
	})
}

// noPanic runs f and wants X_OUTBOX_NO_TX from it, not a panic.
func noPanic(t *testing.T, what string, f func() error) {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", what, r)
			}
		}()
		err = f()
	}()
	if jobs.CodeOf(err) != jobs.CodeOutboxNoTx {
		t.Errorf("%s: %v, want %s", what, err, jobs.CodeOutboxNoTx)
	}
}
