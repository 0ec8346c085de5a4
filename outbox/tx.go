package outbox

import (
	"context"
	"database/sql"
	"reflect"

	"github.com/jackc/pgx/v5"
)

// Tx is a caller's open transaction that staging joins. Make one with Pgx (pgx/v5) or SQL
// (database/sql, SQLite or any driver); the memory store makes its own (MemoryStore.Begin). The
// store staging into it decides whether it can use it: one small interface hides which driver
// the application uses.
type Tx interface {
	// exec runs one statement inside the transaction.
	exec(ctx context.Context, query string, args ...any) error
}

// Pgx wraps a pgx transaction. A nil one, typed (a *pgxpool.Tx never assigned) or not, is no
// transaction: Pgx returns nil.
func Pgx(tx pgx.Tx) Tx {
	if isNil(tx) {
		return nil
	}
	return pgxTx{tx}
}

// SQL wraps a database/sql transaction.
func SQL(tx *sql.Tx) Tx {
	if tx == nil {
		return nil
	}
	return sqlTx{tx}
}

type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.Exec(ctx, q, args...)
	return err
}

type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, q, args...)
	return err
}

type txKey struct{}

// WithTx returns ctx carrying tx, so Outbox.Enqueue (and a job's plain Enqueue through the
// outbox) stages into it: the application opens its transaction, puts it on the context, and
// code further down enqueues without being handed the transaction.
func WithTx(ctx context.Context, tx Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// isNil reports whether v is nil or an interface holding a nil pointer (or map, slice, func,
// chan). A caller's transaction variable that was never assigned reaches the outbox as such a
// typed nil (a nil *pgxpool.Tx in a pgx.Tx, a nil *MemTx in a Tx): compared with == nil it is
// not nil, and the first statement on it panicked in the caller's request. It is no
// transaction, as an untyped nil is.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// TxFrom returns the transaction ctx carries, or nil.
func TxFrom(ctx context.Context) Tx {
	tx, _ := ctx.Value(txKey{}).(Tx)
	return tx
}
