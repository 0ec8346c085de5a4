package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
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
//
// Each field is decoded on its own, and one whose value msgpack cannot decode (a codec's
// envelope, an extension msgpack knows nothing of, which every surface stores and shows at any
// depth) is no pair: no wait's match canonicalises to it. Decoding the whole payload at once
// refused such an event as "not msgpack", though a wait matched on a field in the clear beside
// it (signals TestAPayloadCarryingAnEnvelopeIsMatchedOnItsOtherFields).
func FieldKeys(payload []byte) ([]string, error) {
	if len(payload) == 0 {
		return nil, nil
	}
	// The whole payload decodes at once unless a field carries what msgpack does not know: one
	// decode then, as every publish once made, and a field at a time only for such a payload.
	var whole any
	if msgpack.Unmarshal(payload, &whole) == nil {
		switch m := whole.(type) {
		case map[string]any:
			return MatchKeys(m)
		case map[any]any:
			named := make(map[string]any, len(m))
			for k, x := range m {
				named[fmt.Sprint(k)] = x
			}
			return MatchKeys(named)
		}
		return nil, nil
	}
	notMsgpack := func(err error) error { return fmt.Errorf("event payload is not msgpack: %w", err) }
	dec := msgpack.NewDecoder(bytes.NewReader(payload))
	code, err := dec.PeekCode()
	if err != nil {
		return nil, notMsgpack(err)
	}
	if !msgpcode.IsFixedMap(code) && code != msgpcode.Map16 && code != msgpcode.Map32 {
		if err := dec.Skip(); err != nil {
			return nil, notMsgpack(err)
		}
		return nil, nil
	}
	n, err := dec.DecodeMapLen()
	if err != nil {
		return nil, notMsgpack(err)
	}
	m := make(map[string]any, min(n, 1<<10))
	for range n {
		k, err := dec.DecodeInterface()
		if err != nil {
			return nil, notMsgpack(err)
		}
		raw, err := dec.DecodeRaw()
		if err != nil {
			return nil, notMsgpack(err)
		}
		name, ok := k.(string)
		if !ok {
			name = fmt.Sprint(k)
		}
		var v any
		if msgpack.Unmarshal(raw, &v) != nil {
			delete(m, name) // a later value of the name wins, as in a decoded map
			continue
		}
		m[name] = v
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
	case time.Time:
		return canonicalTime(x)
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
	if err := enc.Encode(utcTimes(JSONable(g))); err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(buf.Bytes())), nil
}

// canonicalTime writes an instant in UTC. msgpack decodes a timestamp in the process's local
// zone, and a wait's pairs are made by the worker while a payload's are made by the engine, often
// in two zones: with the offset in the pair, one instant was two pairs and the event never
// reached the wait (TestATimeMatchesWhateverTheProcessZone). In UTC it is also the pair of the
// RFC 3339 "…Z" string a JSON payload carries.
func canonicalTime(t time.Time) (string, error) {
	b, err := json.Marshal(t.UTC())
	return string(b), err
}

// utcTimes puts every time in a decoded composite value in UTC (see canonicalTime). Only what
// msgpack.Unmarshal and JSONable make needs a look: maps with string keys, slices, times.
func utcTimes(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC()
	case map[string]any:
		for k, e := range x {
			x[k] = utcTimes(e)
		}
	case []any:
		for i, e := range x {
			x[i] = utcTimes(e)
		}
	}
	return v
}

// canonicalFloat writes a whole number as an integer, so that 1, int64(1) and 1.0 are one key;
// every whole float64 in [-2^63, 2^64) is an integer some int64 or uint64 holds exactly. The
// bottom, -2^63, is math.MinInt64: bounding the magnitude below 2^63 wrote it as a float, and it
// did not match the int64 (TestTheMostNegativeInt64MatchesItsFloat).
func canonicalFloat(f float64) string {
	if f == math.Trunc(f) {
		switch {
		case f >= -(1<<63) && f < 1<<63:
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
