package backfill

import (
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/ultimat3/jobs"
)

// normalCursor is c as a resumed pass reads it back from its checkpoint: through the codec the
// checkpoint is recorded with (msgpack), then with its values normalised (normalValue). The pass
// hands a source only cursors made so, live as after a crash, so a source sees the same types
// either way (Cursor) and a source that breaks only after a crash cannot be written. An empty
// cursor is nil. A cursor the codec cannot encode fails here, on the page that returned it, rather
// than at its checkpoint.
//
// A time keeps its zone: msgpack keeps only its instant, so the checkpoint records the zone of
// each time in the cursor that is not UTC beside it (Checkpoint.Zones, zonesOf) and the pass puts
// it back (withZones). A driver that binds a time as text in the value's own zone (modernc's
// SQLite) compares that text with the table's, and a cursor handed back in another zone than the
// source returned it in skipped rows silently.
func normalCursor(c Cursor) (Cursor, error) {
	if len(c) == 0 {
		return nil, nil
	}
	b, err := jobs.Encode(c)
	if err != nil {
		return nil, err
	}
	var out Cursor
	if err := jobs.Decode(b, &out); err != nil {
		return nil, err
	}
	return withZones(normalDecoded(out), zonesOf(c)), nil
}

// CursorZone is the zone a time in a cursor was returned in, when not UTC: what a checkpoint
// keeps beside its cursor, whose codec keeps a time's instant only.
type CursorZone struct {
	// Index is the time's place in the cursor.
	Index int `json:"i"`
	// Name is the zone's abbreviation at that instant ("EST"; "" for an unnamed offset).
	Name string `json:"name,omitempty"`
	// Offset is the zone's offset east of UTC at that instant, in seconds.
	Offset int `json:"offset"`
}

// zonesOf lists the zone of each time at the top of c that is not in UTC. A time nested in a
// slice or a map is read back in UTC: the keyset sources bind the cursor's own values.
func zonesOf(c Cursor) []CursorZone {
	var out []CursorZone
	for i, v := range c {
		var t time.Time
		switch x := v.(type) {
		case time.Time:
			t = x
		case *time.Time:
			if x == nil {
				continue
			}
			t = *x
		default:
			continue
		}
		if name, off := t.Zone(); off != 0 || name != "UTC" {
			out = append(out, CursorZone{Index: i, Name: name, Offset: off})
		}
	}
	return out
}

// withZones puts each time of c (decoded, so in UTC) back in the zone zs records for it: a fixed
// zone of the same name and offset, which formats that instant exactly as the zone it was
// returned in did. A checkpoint recorded before zones were kept has none, and its times stay in
// UTC, as they were read then. c is changed in place and returned.
func withZones(c Cursor, zs []CursorZone) Cursor {
	for _, z := range zs {
		if z.Index < 0 || z.Index >= len(c) {
			continue
		}
		if t, ok := c[z.Index].(time.Time); ok {
			c[z.Index] = t.In(fixedZone(z.Name, z.Offset))
		}
	}
	return c
}

// zones caches the fixed zones withZones made, so a page's cursor reuses its predecessor's
// location (and a page read ahead compares equal to the cursor it was asked after).
var zones sync.Map // CursorZone{Name, Offset} → *time.Location

func fixedZone(name string, offset int) *time.Location {
	k := CursorZone{Name: name, Offset: offset}
	if l, ok := zones.Load(k); ok {
		return l.(*time.Location)
	}
	l, _ := zones.LoadOrStore(k, time.FixedZone(name, offset))
	return l.(*time.Location)
}

// normalDecoded normalises a cursor decoded from a checkpoint (a replayed page) into a new
// cursor: the codec's types are compact (an int8 for 7) and its times local.
func normalDecoded(c Cursor) Cursor {
	if len(c) == 0 {
		return nil
	}
	out := make(Cursor, len(c))
	for i, v := range c {
		out[i] = normalValue(v)
	}
	return out
}

// normalValue maps a decoded value to its stable type: integers to int64 (a uint64 above
// math.MaxInt64 stays one), floats to float64, times to UTC (withZones then puts a cursor's times
// back in their zones); slices and maps are copied with their values normalised.
func normalValue(v any) any {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint:
		if uint64(x) <= math.MaxInt64 {
			return int64(x)
		}
		return uint64(x)
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
		return x
	case float32:
		return float64(x)
	case time.Time:
		return x.UTC()
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalValue(e)
		}
		return out
	case map[any]any:
		out := make(map[any]any, len(x))
		for k, e := range x {
			out[k] = normalValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalValue(e)
		}
		return out
	}
	return v
}

// sameCursor reports whether two normalised cursors are the same position.
func sameCursor(a, b Cursor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

func sameValue(a, b any) bool {
	switch x := a.(type) {
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case []byte:
		y, ok := b.([]byte)
		return ok && string(x) == string(y)
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || (math.IsNaN(x) && math.IsNaN(y)))
	}
	return reflect.DeepEqual(a, b)
}
