package jobs

import (
	"bytes"
	"encoding/json"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs/history"
)

// Inputs, step outputs, results and event payloads are stored as msgpack. Structs are encoded by
// their `json` tags, so a value enqueued as JSON over the admin API decodes into the same Go
// struct a typed caller would have sent.

// Encode encodes v as msgpack.
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("json")
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, Wrap(CodeEncoding, err, "encode %T", v)
	}
	return buf.Bytes(), nil
}

// Decode decodes msgpack data into v (a pointer).
func Decode(data []byte, v any) error {
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	dec.SetCustomStructTag("json")
	dec.SetMapDecoder(func(d *msgpack.Decoder) (any, error) { return d.DecodeUntypedMap() })
	if err := dec.Decode(v); err != nil {
		return Wrap(CodeEncoding, err, "decode into %T", v)
	}
	return nil
}

// FromJSON converts a JSON document to the msgpack form the engine stores. Integral numbers
// become integers, so they decode into int fields.
func FromJSON(doc []byte) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return Encode(nil)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, Wrap(CodeBadRequest, err, "invalid JSON")
	}
	if dec.More() {
		return nil, Errorf(CodeBadRequest, "invalid JSON: trailing data")
	}
	return Encode(numbers(v))
}

// ToJSON renders stored msgpack as JSON, for people and the admin API.
func ToJSON(data []byte) (json.RawMessage, error) {
	if len(data) == 0 {
		return json.RawMessage("null"), nil
	}
	var v any
	if err := msgpack.Unmarshal(data, &v); err != nil {
		return nil, Wrap(CodeEncoding, err, "stored value is not msgpack")
	}
	out, err := json.Marshal(history.JSONable(v))
	if err != nil {
		return nil, Wrap(CodeEncoding, err, "render JSON")
	}
	return out, nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
