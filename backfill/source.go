package backfill

import (
	"context"
	"math"
	"strconv"

	"github.com/ultimat3/jobs"
)

// Cursor is the keyset position after a page: the key values of its last row, in key order
// (several for a composite key). It is what a page's checkpoint records, so its values must be
// plain data (numbers, strings, times, bytes).
//
// A checkpoint travels through msgpack, which keeps a value but not its Go type: an int64 7
// comes back as an int8, a time loses its zone, a named string type is a string. So the pass
// hands a source every cursor as a resumed pass would read it back, on the first attempt as after
// a crash, with the types below (normalised once more after the decode), and a source reads
// After the same way whether or not the run was resumed:
//
//   - every integer (int, int8 … int64, uint … uint64, and named integer types) is an int64, or a
//     uint64 when it is above math.MaxInt64;
//   - a float32 or float64 is a float64;
//   - a time.Time is to the nanosecond (no monotonic reading), in the zone the source returned
//     it in: the checkpoint keeps that zone's name and offset beside the cursor (Checkpoint.Zones),
//     and the time reads back in a fixed zone of the same name and offset, which formats it as
//     the source's zone did. A driver that binds a time as text in its own zone (modernc's SQLite)
//     so compares it as the source returned it. A checkpoint recorded without zones (an earlier
//     release) reads its times in UTC, and so does a time nested in a slice or a map;
//   - a string, or a named string type, is a string;
//   - a []byte or a byte array ([16]byte, a UUID) is a []byte;
//   - a bool is a bool, and nil is nil;
//   - anything else reads back as msgpack decodes it into an any: a slice as a []any, a struct
//     or a map as a map, each value normalised as above.
//
// So an integer key reads as req.After[0].(int64) on every page, first attempt or resumed, while
// asserting the type the source returned (req.After[0].(int), or a named type) fails on the
// second page. ParseCount reads a non-negative integer of any type. The keyset sources pass the
// values to the database driver as they are; the drivers accept these types.
type Cursor []any

// PageRequest asks a source for one page.
type PageRequest struct {
	// After is the cursor of the previous page, with its values normalised as Cursor says; nil
	// for the first page.
	After Cursor
	// Limit is the most rows to return: the backfill's batch.
	Limit int
	// Tenant scopes the page to one tenant; "" means every tenant (the backfill was declared
	// for no tenant, and the pass opens the cross-tenant scope itself).
	Tenant string
}

// CountRequest is what a count declared with CountFor is asked: the scope of the pass.
type CountRequest struct {
	// Tenant is the tenant the pass sweeps, as PageRequest.Tenant: a per-tenant backfill's count
	// counts that tenant's rows only (the rows its source pages for that tenant), "" for a
	// backfill declared for every tenant.
	Tenant string
}

// Source reads the rows a backfill sweeps, one page per call: ONE statement per page, keyset
// ("the rows whose key is after this cursor, in key order, up to the limit"), never OFFSET,
// which rescans every row before the page and skips or repeats rows when earlier ones change.
//
// A source returns the page's rows and the cursor of its last row. Its contract:
//   - the rows come in key order, the order the cursor compares in, and the cursor is the key of
//     the page's LAST row. A page out of order, or a cursor that is not its last row's key,
//     skips the rows between that cursor and the true last key, silently: the pass cannot
//     compare keys of any type in the source's own order, so it cannot see it;
//   - it returns fewer rows than the limit only when it reached the end (an empty page ends the
//     pass too);
//   - a full page names a cursor, and the cursor moves: a full page with no cursor, or one whose
//     cursor is the cursor it was asked after, would read the same page forever. The pass checks
//     both and fails the run with X_INVARIANT (terminal: a retry would loop the same way);
//   - it returns no more rows than the limit (X_INVARIANT otherwise).
//
// The keyset sources of package backfill/keyset cover a table or a view over database/sql or a
// pgx pool; write your own for anything else (an API that pages by token, a file): keep the
// page's position in the cursor, never the rows.
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
		// Bounded where int64 is, not at 2^53: an integer type carries its value exactly (only a
		// float64 loses integers past 2^53).
		if x > math.MaxInt64 {
			return 0, jobs.Errorf(jobs.CodeInvariant, "count %d is out of range", x)
		}
		n = int64(x)
	case uint:
		return ParseCount(uint64(x))
	case uint32:
		n = int64(x)
	case uint16:
		n = int64(x)
	case uint8:
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
