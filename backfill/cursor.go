package backfill

import (
	"math"
	"reflect"
	"time"

	"github.com/ultimat3/jobs"
)

// normalCursor is c as a resumed pass reads it back from its checkpoint: through the codec the
// checkpoint is recorded with (msgpack), then with its values normalised (normalValue). The pass
// hands a source only cursors made so, live as after a crash, so a source sees the same types
// either way (Cursor) and a source that breaks only after a crash cannot be written. An empty
// cursor is nil. A cursor the codec cannot encode fails here, on the page that returned it, rather
// than at its checkpoint.
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
	return normalDecoded(out), nil
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
// math.MaxInt64 stays one), floats to float64, times to UTC; slices and maps are copied with
// their values normalised.
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
