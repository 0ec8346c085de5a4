package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// copyRows is a binary COPY stream (the format of COPY … FROM STDIN BINARY) written field by
// field. The bulk paths write their rows with it rather than through pgx's CopyFrom, which
// first describes the table (a round trip and a statement for the server to plan) and then
// looks up an encode plan for every value of every row, boxed in an interface: for the few
// fixed column types of runs and history the encoding is a length and the bytes.
type copyRows struct {
	buf bytes.Buffer
}

// copyHeader is the binary COPY signature, a zero flags word and an empty header extension.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// pgEpochMicros is 2000-01-01 UTC, the zero of a binary timestamptz, in Unix microseconds.
const pgEpochMicros = 946_684_800_000_000

func newCopyRows(rowSize, rows int) *copyRows {
	c := &copyRows{}
	c.buf.Grow(len(copyHeader) + rowSize*rows + 2)
	c.buf.Write(copyHeader)
	return c
}

// row starts a row of n fields.
func (c *copyRows) row(n int) { c.u16(uint16(n)) }

func (c *copyRows) u16(v uint16) {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	c.buf.Write(b[:])
}

func (c *copyRows) u32(v uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	c.buf.Write(b[:])
}

func (c *copyRows) u64(v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	c.buf.Write(b[:])
}

func (c *copyRows) null() { c.u32(0xffffffff) }

func (c *copyRows) text(s string) {
	c.u32(uint32(len(s)))
	c.buf.WriteString(s)
}

// bytea writes b, or NULL for a nil slice (as pgx encodes one).
func (c *copyRows) bytea(b []byte) {
	if b == nil {
		c.null()
		return
	}
	c.u32(uint32(len(b)))
	c.buf.Write(b)
}

func (c *copyRows) bool(v bool) {
	c.u32(1)
	if v {
		c.buf.WriteByte(1)
	} else {
		c.buf.WriteByte(0)
	}
}

func (c *copyRows) int4(v int32) {
	c.u32(4)
	c.u32(uint32(v))
}

func (c *copyRows) int8(v int64) {
	c.u32(8)
	c.u64(uint64(v))
}

// timestamptz writes t to the microsecond (truncated toward the past, as pgTime truncates
// what the caller is answered), or NULL for the zero time when nullable.
func (c *copyRows) timestamptz(t time.Time, nullable bool) {
	if nullable && t.IsZero() {
		c.null()
		return
	}
	c.int8(t.Truncate(time.Microsecond).UnixMicro() - pgEpochMicros)
}

// send ends the stream and copies it into table's cols on the transaction's connection.
func (c *copyRows) send(ctx context.Context, t *txn, table pgx.Identifier, cols []string) error {
	c.u16(0xffff)
	quoted := make([]string, len(cols))
	for i, col := range cols {
		quoted[i] = pgx.Identifier{col}.Sanitize()
	}
	_, err := t.pgConn().CopyFrom(ctx, &c.buf, fmt.Sprintf(sqlBulkCopy, table.Sanitize(), strings.Join(quoted, ", ")))
	return err
}
