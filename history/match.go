package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
)

// Events are matched to waits by equality of top-level fields. Both sides are reduced to the
// same canonical strings, "field=value" with value in a canonical JSON form, so that a store can
// match with plain string equality (an index in SQL) and 1, int64(1) and 1.0 compare equal
// whether the payload came from Go, msgpack or JSON.

// MatchKeys turns a wait's match (field → value) into sorted canonical pairs.
func MatchKeys(match map[string]any) ([]string, error) {
	keys := make([]string, 0, len(match))
	for k, v := range match {
		c, err := canonical(v)
		if err != nil {
			return nil, fmt.Errorf("match field %q: %w", k, err)
		}
		keys = append(keys, k+"="+c)
	}
	sort.Strings(keys)
	return keys, nil
}

// FieldKeys returns the canonical pairs of a msgpack-encoded payload's top-level fields. A
// payload that is not a map has no fields: only a wait with an empty match receives it.
func FieldKeys(payload []byte) ([]string, error) {
	if len(payload) == 0 {
		return nil, nil
	}
	var v any
	if err := msgpack.Unmarshal(payload, &v); err != nil {
		return nil, fmt.Errorf("event payload is not msgpack: %w", err)
	}
	m, ok := asStringMap(v)
	if !ok {
		return nil, nil
	}
	return MatchKeys(m)
}

// Matches reports whether every pair of want is among have (both sorted).
func Matches(want, have []string) bool {
	i := 0
	for _, w := range want {
		for i < len(have) && have[i] < w {
			i++
		}
		if i == len(have) || have[i] != w {
			return false
		}
	}
	return true
}

func asStringMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[fmt.Sprint(k)] = x
		}
		return out, true
	}
	return nil, false
}

func canonical(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "null", nil
	case string:
		b, _ := json.Marshal(x)
		return string(b), nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return canonicalFloat(f), nil
		}
		return x.String(), nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(rv.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		return canonicalFloat(rv.Float()), nil
	case reflect.String:
		b, _ := json.Marshal(rv.String())
		return string(b), nil
	case reflect.Bool:
		return strconv.FormatBool(rv.Bool()), nil
	}
	// Composite values: their JSON, with map keys sorted by encoding/json. Round-trip through
	// msgpack first so a struct and the map it decodes to agree, encoded as payloads are
	// (jobs.Encode: fields named by their json tags), or a struct's match value would name its
	// fields the Go way and never match the payload that carries it.
	var rawBuf bytes.Buffer
	menc := msgpack.NewEncoder(&rawBuf)
	menc.SetCustomStructTag("json")
	menc.UseCompactInts(true)
	if err := menc.Encode(v); err != nil {
		return "", err
	}
	raw := rawBuf.Bytes()
	var g any
	if err := msgpack.Unmarshal(raw, &g); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(JSONable(g)); err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(buf.Bytes())), nil
}

// canonicalFloat writes a whole number as an integer, so that 1, int64(1) and 1.0 are one key;
// every whole float64 below 2^64 in magnitude is an integer some int64 or uint64 holds exactly.
func canonicalFloat(f float64) string {
	if f == math.Trunc(f) {
		switch {
		case math.Abs(f) < 1<<63:
			return strconv.FormatInt(int64(f), 10)
		case f >= 0 && f < 1<<64:
			return strconv.FormatUint(uint64(f), 10)
		}
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// JSONable converts msgpack's generic maps (map[any]any), at any depth, into ones encoding/json
// accepts.
func JSONable(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = JSONable(e)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = JSONable(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = JSONable(e)
		}
		return out
	}
	return v
}
