package history

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// A replay decodes one payload per recorded event, so a long history is decoded hundreds of
// thousands of times in a row. msgpack.Unmarshal pools its decoder but allocates a reader per
// call; pooling the reader beside the decoder removes that allocation.
type decoderBox struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var decoders = sync.Pool{New: func() any { return &decoderBox{dec: msgpack.NewDecoder(nil)} }}

// unmarshal is msgpack.Unmarshal (default struct tags, no options) without the per-call reader.
func unmarshal(data []byte, v any) error {
	b := decoders.Get().(*decoderBox)
	b.r.Reset(data)
	b.dec.Reset(&b.r)
	err := b.dec.Decode(v)
	// Drop the reference to data so a pooled box never keeps a history alive.
	b.r.Reset(nil)
	b.dec.Reset(nil)
	decoders.Put(b)
	return err
}

// StepCompleted decodes the payload of a KindStepCompleted event as its concrete type, which
// spares replay boxing every recorded step into a Payload. Other kinds are an error.
func (e Event) StepCompleted() (StepCompleted, error) {
	var v StepCompleted
	if e.Kind != KindStepCompleted {
		return v, fmt.Errorf("history: event %d is %s, not %s", e.Seq, e.Kind, KindStepCompleted)
	}
	if v, ok := decodeStepCompleted(e.Data); ok {
		return v, nil
	}
	if err := unmarshal(e.Data, &v); err != nil {
		return v, fmt.Errorf("history: decode event %d (%s): %w", e.Seq, e.Kind, err)
	}
	return v, nil
}

// encoderBox is a pooled encoder with its buffer, for New: msgpack.Marshal pools its encoder but
// grows a fresh buffer byte by byte for every event, several allocations per recorded step.
type encoderBox struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encoders = sync.Pool{New: func() any {
	b := &encoderBox{}
	b.enc = msgpack.NewEncoder(&b.buf)
	return b
}}

// maxPooledBuffer keeps a rare large payload's buffer out of the pool.
const maxPooledBuffer = 64 << 10

// marshal is msgpack.Marshal (default struct tags, no options) returning an exact-size copy.
func marshal(v any) ([]byte, error) {
	b := encoders.Get().(*encoderBox)
	b.buf.Reset()
	if err := b.enc.Encode(v); err != nil {
		return nil, err // not put back: an encoder that failed midway is not reused
	}
	out := bytes.Clone(b.buf.Bytes())
	if b.buf.Cap() <= maxPooledBuffer {
		encoders.Put(b)
	}
	return out, nil
}
