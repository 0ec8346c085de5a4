package wire_test

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/wire"
)

// A request body's entries are bounded in all, not only per container: a body of many full
// containers of one-byte items decodes to a struct per byte. A stored value is the job's to
// decode, so Value has no such budget.
func TestShapeBoundsEntriesInAll(t *testing.T) {
	body := func(arrays int) []byte {
		b := []byte{0xdd, 0, 0, 0, byte(arrays)}
		for range arrays {
			b = append(b, 0xdc, 0xff, 0xff)
			for range 0xffff {
				b = append(b, 0x80)
			}
		}
		return b
	}
	under, over := body(wire.MaxEntries/0xffff-1), body(wire.MaxEntries/0xffff+1)
	if err := wire.Shape(under); err != nil {
		t.Fatalf("%d entries: %v; want accepted", (wire.MaxEntries/0xffff-1)*0xffff, err)
	}
	if err := wire.Shape(over); !jobs.HasCode(err, jobs.CodeBadRequest) {
		t.Fatalf("%d entries: %v; want X_BAD_REQUEST", (wire.MaxEntries/0xffff+1)*0xffff, err)
	}
	if err := wire.Value(over); err != nil {
		t.Fatalf("a stored value of %d entries: %v; want accepted", (wire.MaxEntries/0xffff+1)*0xffff, err)
	}
}
