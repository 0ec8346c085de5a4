package jobs

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/history"
)

// Inputs, step outputs, results and event payloads are stored as msgpack. Structs are encoded by
// their `json` tags, so a value enqueued as JSON over the admin API decodes into the same Go
// struct a typed caller would have sent.

// Encode encodes v as msgpack.
func Encode(v any) ([]byte, error) {
	b := valueEncoders.Get().(*valueEncoder)
	b.buf.Reset()
	if err := b.enc.Encode(v); err != nil {
		// Not put back: an encoder that failed midway is not reused.
		return nil, Wrap(CodeEncoding, err, "encode %T", v)
	}
	out := bytes.Clone(b.buf.Bytes())
	if b.buf.Cap() <= maxPooledEncodeBuffer {
		valueEncoders.Put(b)
	}
	return out, nil
}

// valueEncoder is a pooled encoder writing into its own buffer: every live step encodes its
// output, and a fresh encoder with a buffer grown byte by byte was several allocations per
// value where the pooled one leaves the one copy returned.
type valueEncoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

// maxPooledEncodeBuffer keeps a rare large value's buffer out of the pool.
const maxPooledEncodeBuffer = 64 << 10

var valueEncoders = sync.Pool{New: func() any {
	b := &valueEncoder{}
	b.enc = msgpack.NewEncoder(&b.buf)
	b.enc.SetCustomStructTag("json")
	b.enc.SetSortMapKeys(true)
	b.enc.UseCompactInts(true)
	return b
}}

// Decode decodes msgpack data into v (a pointer).
func Decode(data []byte, v any) error {
	if what, ok := codec.Describe(data); ok {
		// Decoding the envelope itself would yield an unreadable value: say which codec to use.
		return Errorf(CodeEncoding, "decode into %T: the value is %s; open it with that codec first (codec/wrap on the worker or client): this side has no codec for it, or its key does not open it", v, what)
	}
	b := valueDecoders.Get().(*valueDecoder)
	b.r.Reset(data)
	b.dec.Reset(&b.r)
	b.dec.SetCustomStructTag("json")
	b.dec.SetMapDecoder(untypedMap)
	err := b.dec.Decode(v)
	b.r.Reset(nil) // a pooled decoder keeps no reference to the caller's bytes
	b.dec.Reset(nil)
	valueDecoders.Put(b)
	if err != nil {
		return Wrap(CodeEncoding, err, "decode into %T", v)
	}
	return nil
}

// valueDecoder is a pooled decoder with its reader: a replayed step decodes its recorded output
// once per step, and a fresh msgpack decoder (with its buffers) per value was most of a replay's
// allocations.
type valueDecoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var valueDecoders = sync.Pool{New: func() any { return &valueDecoder{dec: msgpack.NewDecoder(nil)} }}

func untypedMap(d *msgpack.Decoder) (any, error) { return d.DecodeUntypedMap() }

// FromJSON converts a JSON document to the msgpack form the engine stores. Integral numbers
// become integers, so they decode into int fields.
func FromJSON(doc []byte) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return Encode(nil)
	}
	if err := ValidJSONText(doc); err != nil {
		return nil, err
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
	v, err := numbers(v)
	if err != nil {
		return nil, err
	}
	return Encode(v)
}

// ToJSON renders stored msgpack as JSON, for people and the admin API.
func ToJSON(data []byte) (json.RawMessage, error) {
	if len(data) == 0 {
		return json.RawMessage("null"), nil
	}
	// An envelope shows as what it is: the engine never holds the codec. history renders it, so
	// the admin API and the dumps show a value alike.
	v, err := history.ValueView(data, nil)
	if err != nil {
		return nil, Wrap(CodeEncoding, err, "stored value is not msgpack")
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, Wrap(CodeEncoding, err, "render JSON")
	}
	return out, nil
}

// numbers turns JSON numbers into the integers or floats msgpack stores. A number no int64,
// uint64 or finite float64 holds (1e400, a 30-digit integer) is refused rather than stored as an
// infinity or rounded: an infinity would make the run's history unreadable as JSON, and a
// rounded id is a different id.
func numbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		if !strings.ContainsAny(x.String(), ".eE") {
			if u, err := strconv.ParseUint(x.String(), 10, 64); err == nil {
				return u, nil
			}
			return nil, Errorf(CodeBadRequest, "invalid JSON: the integer %s is out of range", x)
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return nil, Errorf(CodeBadRequest, "invalid JSON: the number %s is out of range", x)
		}
		return f, nil
	case map[string]any:
		for k, e := range x {
			n, err := numbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := numbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}

// ValidJSONText refuses JSON text that encoding/json would silently alter: bytes that are not
// UTF-8, and \u escapes of lone surrogates, both of which it decodes as U+FFFD. The msgpack path
// refuses the same values, so a caller gets the same answer whichever encoding it sends.
func ValidJSONText(doc []byte) error {
	if !utf8.Valid(doc) {
		return Errorf(CodeBadRequest, "invalid JSON: the text is not valid UTF-8")
	}
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(doc) || doc[i] != '\\' || doc[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(doc[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(doc); i++ {
		if doc[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // another escape (\\, \", …): skip its second byte
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return Errorf(CodeBadRequest, "invalid JSON: a \\u escape of a lone surrogate at byte %d", i)
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return Errorf(CodeBadRequest, "invalid JSON: a \\u escape of a lone surrogate at byte %d", i)
		default:
			i += 5
		}
	}
	return nil
}
