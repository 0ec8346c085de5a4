package backfill

import (
	"context"
	"strconv"

	"github.com/ultimat3/jobs"
)

// Cursor is the keyset position after a page: the key values of its last row, in key order
// (several for a composite key). It is what a page's checkpoint records, so its values must be
// plain data (numbers, strings, times, bytes).
type Cursor []any

// PageRequest asks a source for one page.
type PageRequest struct {
	// After is the cursor of the previous page; nil for the first.
	After Cursor
	// Limit is the most rows to return: the backfill's batch.
	Limit int
	// Tenant scopes the page to one tenant; "" means every tenant (the backfill was declared
	// for no tenant, and the pass opens the cross-tenant scope itself).
	Tenant string
}

// Source reads the rows a backfill sweeps, one page per call: ONE statement per page, keyset
// ("the rows whose key is after this cursor, in key order, up to the limit"), never OFFSET,
// which rescans every row before the page and skips or repeats rows when earlier ones change.
//
// A source returns the page's rows and the cursor of its last row. It returns fewer rows than
// the limit only when it reached the end. The keyset sources of package backfill/keyset cover a
// table or a view over database/sql or a pgx pool; write your own for anything else (an API that
// pages by token, a file): keep the page's position in the cursor, never the rows.
type Source[Row any] interface {
	Page(ctx context.Context, req PageRequest) (rows []Row, next Cursor, err error)
}

// SourceFunc adapts a function to a Source.
type SourceFunc[Row any] func(ctx context.Context, req PageRequest) ([]Row, Cursor, error)

// Page implements Source.
func (f SourceFunc[Row]) Page(ctx context.Context, req PageRequest) ([]Row, Cursor, error) {
	return f(ctx, req)
}

// Describer is a source that can say what it reads (its statement); the description is part of
// the definition's checksum.
type Describer interface {
	Describe() string
}

// ParseCount reads a count as a database driver returned it, trusting nothing: a non-negative
// integer (in any integer type, a float with no fraction, or decimal text) or X_INVARIANT. A
// NaN or a negative count would otherwise pass "count > 0" as converged and complete a sweep the
// check exists to fail.
func ParseCount(v any) (int64, error) {
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int16:
		n = int64(x)
	case int8:
		n = int64(x)
	case uint64:
		if x > 1<<53 {
			return 0, jobs.Errorf(jobs.CodeInvariant, "count %d is out of range", x)
		}
		n = int64(x)
	case uint32:
		n = int64(x)
	case float64:
		if x != x || x < 0 || x > 1<<53 || x != float64(int64(x)) {
			return 0, jobs.Errorf(jobs.CodeInvariant, "count %v is not a non-negative integer", x)
		}
		n = int64(x)
	case float32:
		return ParseCount(float64(x))
	case []byte:
		return ParseCount(string(x))
	case string:
		p, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, jobs.Errorf(jobs.CodeInvariant, "count %q is not an integer", x)
		}
		n = p
	default:
		return 0, jobs.Errorf(jobs.CodeInvariant, "count of type %T is not an integer", v)
	}
	if n < 0 {
		return 0, jobs.Errorf(jobs.CodeInvariant, "count %d is negative", n)
	}
	return n, nil
}
