package postgres

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Array parameters that pgx encodes without an allocation per element. Handed a []string,
// []time.Time or [][]byte, pgx wraps it in a generic array whose Index returns each element
// boxed in an interface: a string or a time.Time does not fit in one, so every element of every
// array parameter was a heap allocation (a [][]byte went through reflection, one more), about
// eight per applied step in the steps statement alone. These arrays hand out a pointer-shaped
// reference to the element instead (a struct of one pointer is stored in an interface as is),
// and the reference gives pgx the value through the codec's Valuer interface. What goes on the
// wire is byte for byte what pgx sends for the plain slice: the same binary array of the same
// element type, a nil []byte still a NULL element.

// dims is the Dimensions of a one-dimensional array parameter; a nil slice is a NULL array.
func dims[T any](a []T) []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

// textArray is a text[] parameter.
type textArray []string

type textRef struct{ p *string }

func (a textArray) Dimensions() []pgtype.ArrayDimension { return dims(a) }
func (a textArray) Index(i int) any                     { return textRef{&a[i]} }
func (a textArray) IndexType() any                      { return textRef{} }

func (r textRef) TextValue() (pgtype.Text, error) { return pgtype.Text{String: *r.p, Valid: true}, nil }

// timeArray is a timestamptz[] parameter.
type timeArray []time.Time

type timeRef struct{ p *time.Time }

func (a timeArray) Dimensions() []pgtype.ArrayDimension { return dims(a) }
func (a timeArray) Index(i int) any                     { return timeRef{&a[i]} }
func (a timeArray) IndexType() any                      { return timeRef{} }

func (r timeRef) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: *r.p, Valid: true}, nil
}

// byteaArray is a bytea[] parameter; a nil element is NULL.
type byteaArray [][]byte

type byteaRef struct{ p *[]byte }

func (a byteaArray) Dimensions() []pgtype.ArrayDimension { return dims(a) }
func (a byteaArray) Index(i int) any                     { return byteaRef{&a[i]} }
func (a byteaArray) IndexType() any                      { return byteaRef{} }

func (r byteaRef) BytesValue() ([]byte, error) { return *r.p, nil }

// tsArray is a timestamptz[] parameter whose elements may be NULL.
type tsArray []pgtype.Timestamptz

type tsRef struct{ p *pgtype.Timestamptz }

func (a tsArray) Dimensions() []pgtype.ArrayDimension { return dims(a) }
func (a tsArray) Index(i int) any                     { return tsRef{&a[i]} }
func (a tsArray) IndexType() any                      { return tsRef{} }

func (r tsRef) TimestamptzValue() (pgtype.Timestamptz, error) { return *r.p, nil }

// int8Array is a bigint[] parameter. An int64 fits in an interface only when it is small (below
// 256), so fences (which carry an epoch in their high bits) and seqs were boxed one by one.
type int8Array []int64

type int8Ref struct{ p *int64 }

func (a int8Array) Dimensions() []pgtype.ArrayDimension { return dims(a) }
func (a int8Array) Index(i int) any                     { return int8Ref{&a[i]} }
func (a int8Array) IndexType() any                      { return int8Ref{} }

func (r int8Ref) Int64Value() (pgtype.Int8, error) { return pgtype.Int8{Int64: *r.p, Valid: true}, nil }
