package wire_test

import (
	"math"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/internal/wire"
)

// FuzzValueRenders holds Value to its promise: a value it accepts renders as JSON (the admin API
// and the CLI can show it), and one whatever surface sent it.
func FuzzValueRenders(f *testing.F) {
	for _, v := range []any{nil, 1, -1.5, "é", map[string]any{"a": []any{1, "x"}}, math.NaN(), math.Inf(1), []byte{1, 2}} {
		b, _ := msgpack.Marshal(v)
		f.Add(b)
	}
	f.Add([]byte{0xa2, 0xff, 0xfe})
	f.Add([]byte{0xca, 0x7f, 0x80, 0, 0})
	far, _ := msgpack.Marshal(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	f.Add(far)
	// Codec envelopes, whole and inside (every surface shows them), and malformed ones.
	env, _ := codec.Seal("aesgcm/k1", true, []byte("sealed card"))
	f.Add(env)
	f.Add(append([]byte{0x82, 0xa1, 'n', 0x01, 0xa4, 'c', 'a', 'r', 'd'}, env...))
	f.Add(append([]byte{0x92, 0xc0}, env...))
	f.Add([]byte{0x81, 0xa1, 'a', 0xd6, codec.ExtType, 0x00, 0x01, 'x', 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		if wire.Value(b) != nil {
			return
		}
		if wire.Shape(b) != nil && len(b) <= wire.MaxEntries {
			// (A body of more bytes may hold more entries than a request may: Value has no
			// such budget.)
			t.Fatalf("Value accepted %x, which Shape refuses", b)
		}
		if _, err := jobs.ToJSON(b); err != nil {
			t.Fatalf("Value accepted %x, which does not render: %v", b, err)
		}
	})
}

// FuzzFromJSONStoresReadableValues: whatever JSON the admin API accepts is stored as a value the
// engine would accept from msgpack too, and renders back.
func FuzzFromJSONStoresReadableValues(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `1e400`, `-1e400`, `123456789012345678901234567890`, `"\ud800"`,
		`"\ud83d\ude00"`, "\"\xff\"", `[1.5, null, true]`, `18446744073709551615`, `"\\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		b, err := jobs.FromJSON(doc)
		if err != nil {
			if !jobs.HasCode(err, jobs.CodeBadRequest) {
				t.Fatalf("FromJSON(%q) refused with %v, want X_BAD_REQUEST", doc, err)
			}
			return
		}
		if err := wire.Value(b); err != nil {
			t.Fatalf("FromJSON(%q) stored %x, which the msgpack path refuses: %v", doc, b, err)
		}
		if _, err := jobs.ToJSON(b); err != nil {
			t.Fatalf("FromJSON(%q) stored %x, which does not render: %v", doc, b, err)
		}
	})
}

// A time outside the years 0 to 9999 has no JSON form, so no surface could show it (a history
// dump, a retention archive, the run's view): Value refuses it as it refuses NaN, and takes the
// times at both ends of the range.
func TestValueRefusesTimesJSONCannotWrite(t *testing.T) {
	for _, tc := range []struct {
		at time.Time
		ok bool
	}{
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC), false},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), true},
		{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(2026, 12, 4, 6, 0, 0, 1, time.UTC), true},
	} {
		b, err := msgpack.Marshal(tc.at)
		if err != nil {
			t.Fatal(err)
		}
		err = wire.Value(b)
		if (err == nil) != tc.ok {
			t.Errorf("Value(%s) = %v, want accepted %v", tc.at, err, tc.ok)
		}
		if err == nil {
			if _, err := jobs.ToJSON(b); err != nil {
				t.Errorf("Value accepted %s, which does not render: %v", tc.at, err)
			}
		}
	}
}
