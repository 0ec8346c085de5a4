// Package codec transforms the payloads the engine stores (run inputs, step outputs, results) on
// the application's side, for encryption or compression: the engine stores, checks and replays
// what it is given and never needs the key.
//
// A payload a codec wrote is an envelope: one msgpack extension value (type ExtType) that
// carries the codec's id, so a stored payload says which codec made it, and a payload written
// before a codec was configured (plain msgpack) still reads. Open follows the ids, so replay
// works across codec changes: old payloads decode with the codec that wrote them, as long as the
// Set still holds it (a retired key stays in the Set for decoding).
//
// This package has no dependencies: history, the wire checks and the jobs package render
// envelopes with it. codec/wrap applies a Set on a worker's frontend and on an enqueuer;
// codec/aesgcm is an AES-GCM codec with key rotation.
package codec

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Codec transforms payload bytes. Implementations must be safe for concurrent use.
type Codec interface {
	// ID names the codec and whatever Decode needs to pick (a key id): "aesgcm/k2". It is
	// stored with every payload the codec encodes; 1 to 255 bytes of printable UTF-8.
	ID() string
	// Encode transforms a payload.
	Encode(plain []byte) ([]byte, error)
	// Decode reverses the Encode of the codec that wrote id, when it can (Handles).
	Decode(id string, data []byte) ([]byte, error)
	// Handles reports whether Decode reads payloads written under id.
	Handles(id string) bool
}

// Encrypting is implemented by codecs whose output is ciphertext; tools then say "encrypted by"
// rather than "encoded by".
type Encrypting interface{ Encrypts() bool }

// ExtType is the msgpack extension type of an envelope. Any value the engine stores is one
// msgpack value; an envelope is too, so the engine's checks accept it as is.
const ExtType = 74 // 'J'

// ErrUnknownCodec is returned by Open for an envelope no codec of the Set handles.
var ErrUnknownCodec = errors.New("codec: no codec of the set reads this payload")

const flagEncrypted = 1

// Seal wraps data written by codec id as an envelope.
func Seal(id string, encrypted bool, data []byte) ([]byte, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("codec: id %q: want 1 to 255 bytes of printable UTF-8", id)
	}
	body := make([]byte, 0, 2+len(id)+len(data))
	flags := byte(0)
	if encrypted {
		flags = flagEncrypted
	}
	body = append(body, flags, byte(len(id)))
	body = append(body, id...)
	body = append(body, data...)
	// ext8/16/32 header: 0xc7 len8, 0xc8 len16, 0xc9 len32; then the type.
	var out []byte
	switch n := len(body); {
	case n <= 0xff:
		out = append(make([]byte, 0, 3+n), 0xc7, byte(n))
	case n <= 0xffff:
		out = binary.BigEndian.AppendUint16(append(make([]byte, 0, 4+n), 0xc8), uint16(n))
	default:
		out = binary.BigEndian.AppendUint32(append(make([]byte, 0, 6+n), 0xc9), uint32(n))
	}
	out = append(out, ExtType)
	return append(out, body...), nil
}

// ValidID is the rule for the ids Seal writes: 1 to 255 bytes of valid UTF-8, every
// character printable. Bytes that are not UTF-8 all render as U+FFFD in JSON, so two such ids
// ("k\xff", "k\xfe") were shown alike by every tool; an invisible character (U+200B) or a
// bidi override made one id look like another.
func ValidID(id string) bool {
	return len(id) > 0 && len(id) <= 255 && utf8.ValidString(id) &&
		!strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) })
}

// Envelope is a parsed envelope.
type Envelope struct {
	ID        string
	Encrypted bool
	// Data is what the codec wrote.
	Data []byte
}

// Unseal parses b as an envelope; ok is false when b is not one (plain msgpack).
func Unseal(b []byte) (Envelope, bool) {
	if len(b) < 2 {
		return Envelope{}, false
	}
	var n, head int
	switch b[0] {
	case 0xc7:
		n, head = int(b[1]), 2
	case 0xc8:
		if len(b) < 3 {
			return Envelope{}, false
		}
		n, head = int(binary.BigEndian.Uint16(b[1:])), 3
	case 0xc9:
		if len(b) < 5 {
			return Envelope{}, false
		}
		n, head = int(binary.BigEndian.Uint32(b[1:])), 5
	default:
		return Envelope{}, false
	}
	if len(b) != head+1+n || b[head] != ExtType || n < 2 {
		return Envelope{}, false
	}
	body := b[head+1:]
	idLen := int(body[1])
	if idLen == 0 || 2+idLen > len(body) {
		return Envelope{}, false
	}
	return Envelope{ID: string(body[2 : 2+idLen]), Encrypted: body[0]&flagEncrypted != 0, Data: body[2+idLen:]}, true
}

// IsEnvelope reports whether b is an envelope.
func IsEnvelope(b []byte) bool {
	_, ok := Unseal(b)
	return ok
}

// Describe says what an envelope is, for people and for tools without the codec:
// "encrypted by codec aesgcm/k1, 48 bytes". ok is false when b is not an envelope.
func Describe(b []byte) (string, bool) {
	e, ok := Unseal(b)
	if !ok {
		return "", false
	}
	verb := "encoded"
	if e.Encrypted {
		verb = "encrypted"
	}
	// The id is the stored bytes, which any caller can craft, and payloads written before Seal
	// required printable ids may hold others: such an id is shown quoted, so a line break or a
	// terminal escape never reaches a view or an error text raw, and two ids never read alike.
	id := e.ID
	if !ValidID(id) {
		id = strconv.Quote(id)
	}
	return fmt.Sprintf("%s by codec %s, %d bytes", verb, id, len(e.Data)), true
}

// Set is the codecs an application uses: the first encodes, and every one of them decodes the
// payloads it handles. Keep a codec (a key) in the Set for as long as payloads it wrote may be
// read: by runs in flight, retries and replays.
type Set struct {
	codecs []Codec
}

// NewSet returns a Set that encodes with codecs[0]. With no codec it encodes nothing and only
// passes plain payloads through.
func NewSet(codecs ...Codec) *Set { return &Set{codecs: codecs} }

// Encode applies the Set's first codec and seals the result. Encoding an envelope again is
// allowed (compress, then encrypt: see Stack).
func (s *Set) Encode(plain []byte) ([]byte, error) {
	if s == nil || len(s.codecs) == 0 {
		return plain, nil
	}
	return encodeWith(s.codecs[0], plain)
}

func encodeWith(c Codec, plain []byte) ([]byte, error) {
	data, err := c.Encode(plain)
	if err != nil {
		return nil, fmt.Errorf("codec %s: encode: %w", c.ID(), err)
	}
	enc, _ := c.(Encrypting)
	return Seal(c.ID(), enc != nil && enc.Encrypts(), data)
}

// Open returns the plain payload of b: b itself when it is not an envelope, else the payload
// its codec decodes, opened again while it is an envelope (a stacked codec). An envelope no
// codec of the Set handles is ErrUnknownCodec.
func (s *Set) Open(b []byte) ([]byte, error) {
	out, err := s.Peel(b)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Peel is Open for a reader that passes on what it could not open rather than failing: it
// opens b's envelopes as far as the Set can and returns the plain payload, or, with the error
// that stopped it, the innermost envelope it could not open. Whoever then meets that envelope
// (jobs.Decode, Describe) names the codec actually missing: a Stack(Gzip(), aes) payload read
// by a Set holding only the key stops at the deflate envelope, not at the key's, which opened.
// What it returns is always b or an envelope, never the plain payload of a layer that failed.
func (s *Set) Peel(b []byte) ([]byte, error) {
	for depth := 0; ; depth++ {
		e, ok := Unseal(b)
		if !ok {
			return b, nil
		}
		if depth == 8 {
			return b, fmt.Errorf("codec: envelopes nested more than 8 deep")
		}
		c := s.find(e.ID)
		if c == nil {
			return b, fmt.Errorf("%w: %s", ErrUnknownCodec, e.ID)
		}
		plain, err := c.Decode(e.ID, e.Data)
		if err != nil {
			return b, fmt.Errorf("codec %s: decode: %w", e.ID, err)
		}
		b = plain
	}
}

func (s *Set) find(id string) Codec {
	if s == nil {
		return nil
	}
	for _, c := range s.codecs {
		if c.Handles(id) {
			return c
		}
	}
	return nil
}

// Stack encodes with each codec in turn (Stack(Gzip(), aes) compresses, then encrypts). Its
// id is the last codec's: the outer envelope is the last codec's, and Open unwraps the inner
// ones by their own ids, so a Set holding a Stack decodes each layer with the codec that wrote
// it.
func Stack(codecs ...Codec) Codec { return stack(codecs) }

type stack []Codec

// An empty Stack (built from a list that names no codec) has no id and refuses to encode, an
// error on the record rather than an index panic in the worker.
func (s stack) ID() string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1].ID()
}
func (s stack) Encode(plain []byte) ([]byte, error) {
	if len(s) == 0 {
		return nil, errors.New("codec: an empty Stack encodes nothing")
	}
	b := plain
	for i, c := range s {
		if i == len(s)-1 {
			return c.Encode(b)
		}
		var err error
		if b, err = encodeWith(c, b); err != nil {
			return nil, err
		}
	}
	return b, nil
}
func (s stack) Decode(id string, data []byte) ([]byte, error) {
	for _, c := range s {
		if c.Handles(id) {
			return c.Decode(id, data)
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownCodec, id)
}
func (s stack) Handles(id string) bool {
	for _, c := range s {
		if c.Handles(id) {
			return true
		}
	}
	return false
}
func (s stack) Encrypts() bool {
	if len(s) == 0 {
		return false
	}
	e, ok := s[len(s)-1].(Encrypting)
	return ok && e.Encrypts()
}

// Gzip is a compression codec (DEFLATE, id "deflate"). It pays for itself on large, repetitive
// payloads (JSON-like documents of a few KiB and up); a small payload comes out a few bytes
// larger.
func Gzip() Codec { return deflate{max: maxInflated} }

// GzipLimit is Gzip with its own bound on what one payload inflates to (Gzip's is 64 MiB).
func GzipLimit(maxBytes int) Codec { return deflate{max: maxBytes} }

type deflate struct{ max int }

func (deflate) ID() string             { return "deflate" }
func (deflate) Handles(id string) bool { return id == "deflate" }
func (d deflate) Encode(plain []byte) ([]byte, error) {
	// A payload past the bound is refused here, not stored: it deflates far under the engine's
	// payload limit (64 MiB of zeros is a few KiB), so it would land, and then every read of it
	// (the run's replay, its result) would fail on the bound for ever.
	if len(plain) > d.max {
		return nil, fmt.Errorf("the payload is %d bytes, past the %d this codec inflates (GzipLimit)", len(plain), d.max)
	}
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(plain); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxInflated bounds what one payload inflates to (Gzip), so a hostile payload cannot exhaust
// memory.
const maxInflated = 64 << 20

func (d deflate) Decode(_ string, data []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(data))
	defer r.Close()
	// Read one byte past the bound to tell a payload at it from one past it; at the largest int
	// that byte does not fit, and the limit wrapped negative: every payload opened as empty.
	limit := int64(d.max)
	if limit < math.MaxInt64 {
		limit++
	}
	out, err := io.ReadAll(io.LimitReader(r, limit))
	if err != nil {
		return nil, err
	}
	if len(out) > d.max {
		return nil, fmt.Errorf("inflates past %d bytes", d.max)
	}
	return out, nil
}
