// Package msgp writes and reads the msgpack forms msgpack/v5's encoder writes for plain structs,
// by hand, for the few hot types whose reflection showed in CPU profiles (history's commonest
// event payloads, the worker protocol's step record). The writers produce the same bytes as
// msgpack.Marshal (the smallest form of each value); the Reader takes only those forms and
// answers ErrSlowPath for anything else, so that its caller hands the bytes to msgpack's own
// decoder and what is accepted or refused, and how, stays msgpack's.
package msgp

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// ErrSlowPath says the Reader met a form it does not read; msgpack's decoder decides.
var ErrSlowPath = errors.New("msgp: not a form this reader takes")

// StrSize is the size of AppendStr's encoding of s.
func StrSize(s string) int {
	switch n := len(s); {
	case n < 32:
		return 1 + n
	case n <= math.MaxUint8:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	default:
		return 5 + n
	}
}

// BinSize is the size of AppendBin's encoding of b.
func BinSize(b []byte) int {
	switch n := len(b); {
	case b == nil:
		return 1
	case n <= math.MaxUint8:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	default:
		return 5 + n
	}
}

// NewReader reads b from its start.
func NewReader(b []byte) Reader { return Reader{b: b} }

// Done reports whether every byte was read.
func (r *Reader) Done() bool { return r.off == len(r.b) }

// Raw steps over one value and returns its bytes (a view of the input).
func (r *Reader) Raw() ([]byte, error) {
	start := r.off
	if err := r.Skip(0); err != nil {
		return nil, err
	}
	return r.b[start:r.off], nil
}

// Fields reads a map: each key once (a key named twice goes to msgpack's decoder, see keySet),
// handed to field, which reads its value or answers ErrSlowPath for a key it does not know.
func (r *Reader) Fields(field func(key []byte) error) error {
	n, err := r.MapLen()
	if err != nil {
		return err
	}
	var seen keySet
	for ; n > 0; n-- {
		key, err := r.Key()
		if err != nil {
			return err
		}
		if err := seen.add(key); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
	}
	return nil
}

// keySet is the keys a map has named so far: a key named twice (which no encoder of these types
// writes) goes to msgpack's decoder, whose way of merging the two is the one that counts.
type keySet struct {
	n    int
	keys [24][]byte // views of the body, which outlives the decoding
}

func (k *keySet) add(key []byte) error {
	for _, s := range k.keys[:k.n] {
		if string(s) == string(key) {
			return ErrSlowPath
		}
	}
	if k.n == len(k.keys) {
		return ErrSlowPath
	}
	k.keys[k.n] = key
	k.n++
	return nil
}

// Writing msgpack: the smallest form of each value, as msgpack's encoder writes them.

// AppendMapLen appends a map header of n entries.
func AppendMapLen(b []byte, n int) []byte { return appendHeader(b, 0x80, 0xde, n) }

// AppendArrayLen appends an array header of n items.
func AppendArrayLen(b []byte, n int) []byte { return appendHeader(b, 0x90, 0xdc, n) }

// appendHeader appends a container header: the fix form (fix|n) below 16, else the 16-bit
// form (code16) or the 32-bit one after it.
func appendHeader(b []byte, fix, code16 byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return append(b, code16, byte(n>>8), byte(n))
	}
	return append(b, code16+1, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// AppendStr appends s as a str.
func AppendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

// AppendBin appends v as a bin (nil as nil).
func AppendBin(b []byte, v []byte) []byte {
	if v == nil {
		return append(b, 0xc0)
	}
	n := len(v)
	switch {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = append(b, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, v...)
}

// AppendBool appends v.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// AppendInt appends v in its smallest integer form.
func AppendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0 && v < 128:
		return append(b, byte(v))
	case v < 0 && v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8 && v <= math.MaxInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16 && v <= math.MaxInt16:
		return append(b, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return append(b, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

// AppendTime writes t as the msgpack timestamp extension (-1), as msgpack's encoder does.
func AppendTime(b []byte, t time.Time) []byte {
	secs := uint64(t.Unix())
	if secs>>34 == 0 {
		data := uint64(t.Nanosecond())<<34 | secs
		if data&0xffffffff00000000 == 0 {
			return binary.BigEndian.AppendUint32(append(b, 0xd6, 0xff), uint32(data))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xd7, 0xff), data)
	}
	b = binary.BigEndian.AppendUint32(append(b, 0xc7, 12, 0xff), uint32(t.Nanosecond()))
	return binary.BigEndian.AppendUint64(b, secs)
}

// Reading msgpack: only the forms the writers above produce (and nil where msgpack's decoder
// reads it as the zero value); anything else is ErrSlowPath.

// Reader reads msgpack from b; off is how far it has read.
type Reader struct {
	b   []byte
	off int
}

func (r *Reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, ErrSlowPath
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

// n reads a big-endian unsigned integer of size bytes.
func (r *Reader) n(size int) (uint64, error) {
	if len(r.b)-r.off < size {
		return 0, ErrSlowPath
	}
	var v uint64
	for _, c := range r.b[r.off : r.off+size] {
		v = v<<8 | uint64(c)
	}
	r.off += size
	return v, nil
}

func (r *Reader) take(n uint64) ([]byte, error) {
	if uint64(len(r.b)-r.off) < n {
		return nil, ErrSlowPath
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v, nil
}

// sized reads the length that follows code c when c is one of a type's sized forms: forms codes
// from first on, each length twice as wide as the one before, the first w bytes wide (str8/16/32
// from 0xd9 and bin8/16/32 from 0xc4, 1 byte first; map16/32 from 0xde and array16/32 from 0xdc,
// 2 bytes first). ok is false when c is none of them.
func (r *Reader) sized(c, first byte, forms, w int) (n uint64, ok bool, err error) {
	k := int(c) - int(first)
	if k < 0 || k >= forms {
		return 0, false, nil
	}
	n, err = r.n(w << k)
	return n, true, err
}

// MapLen reads a map header.
func (r *Reader) MapLen() (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	if c&0xf0 == 0x80 {
		return int(c & 0x0f), nil
	}
	if n, ok, err := r.sized(c, 0xde, 2, 2); ok {
		return int(n), err
	}
	// nil (the zero value) and anything else: msgpack's decoder.
	return 0, ErrSlowPath
}

// ArrayLen is -1 for nil.
func (r *Reader) ArrayLen() (int, error) {
	c, err := r.byte()
	switch {
	case err != nil:
		return 0, err
	case c&0xf0 == 0x90:
		return r.items(uint64(c&0x0f), nil)
	case c == 0xc0:
		return -1, nil
	}
	if n, ok, err := r.sized(c, 0xdc, 2, 2); ok {
		return r.items(n, err)
	}
	return 0, ErrSlowPath
}

// Strs reads an array of strs (nil as nil).
func (r *Reader) Strs() ([]string, error) {
	m, err := r.ArrayLen()
	if err != nil || m < 0 {
		return nil, err
	}
	out := make([]string, m)
	for i := 0; i < m && err == nil; i++ {
		out[i], err = r.Str()
	}
	return out, err
}

// items is an array's length, refused (to msgpack's decoder, which refuses it too) when the
// rest of the body cannot hold that many items of a byte each: nothing is made for a length a
// few bytes claim.
func (r *Reader) items(n uint64, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	if n > uint64(len(r.b)-r.off) {
		return 0, ErrSlowPath
	}
	return int(n), nil
}

// StrBytes reads a str (or nil, as "") without copying.
func (r *Reader) StrBytes() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	switch {
	case c&0xe0 == 0xa0:
		return r.take(uint64(c & 0x1f))
	case c == 0xc0:
		return nil, nil
	}
	n, ok, err := r.sized(c, 0xd9, 3, 1)
	if !ok {
		return nil, ErrSlowPath
	}
	if err != nil {
		return nil, err
	}
	return r.take(n)
}

// Key reads a map key (a str) without copying.
func (r *Reader) Key() ([]byte, error) { return r.StrBytes() }

// Str reads a str (or nil, as "").
func (r *Reader) Str() (string, error) {
	b, err := r.StrBytes()
	return string(b), err
}

// Bin reads bin (a copy) or nil.
func (r *Reader) Bin() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	if c == 0xc0 {
		return nil, nil
	}
	n, ok, err := r.sized(c, 0xc4, 3, 1)
	if !ok {
		return nil, ErrSlowPath
	}
	if err != nil {
		return nil, err
	}
	v, err := r.take(n)
	if err != nil {
		return nil, err
	}
	return append(make([]byte, 0, len(v)), v...), nil
}

// Bool reads a bool (or nil, as false).
func (r *Reader) Bool() (bool, error) {
	c, err := r.byte()
	switch {
	case err != nil:
		return false, err
	case c == 0xc3:
		return true, nil
	case c == 0xc2 || c == 0xc0:
		return false, nil
	}
	return false, ErrSlowPath
}

// Int reads any integer form (or nil, as 0).
func (r *Reader) Int() (int64, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	if c <= 0x7f || c >= 0xe0 {
		return int64(int8(c)), nil
	}
	var v uint64
	switch c {
	case 0xc0:
		return 0, nil
	case 0xcc, 0xd0:
		v, err = r.n(1)
		if c == 0xd0 {
			return int64(int8(v)), err
		}
	case 0xcd, 0xd1:
		v, err = r.n(2)
		if c == 0xd1 {
			return int64(int16(v)), err
		}
	case 0xce, 0xd2:
		v, err = r.n(4)
		if c == 0xd2 {
			return int64(int32(v)), err
		}
	case 0xcf, 0xd3:
		v, err = r.n(8)
	default:
		return 0, ErrSlowPath
	}
	return int64(v), err
}

// Time reads the timestamp extension as msgpack's decoder does (time.Unix, UTC for the zero
// time), and nil as the zero time; other forms go to msgpack's decoder.
func (r *Reader) Time() (time.Time, error) {
	c, err := r.byte()
	if err != nil {
		return time.Time{}, err
	}
	var tm time.Time
	switch c {
	case 0xc0:
		// Nil: the zero time, as the field's omission reads (msgpack's decoder panics here).
		return tm, nil
	case 0xd6:
		if b, err := r.take(5); err != nil || b[0] != 0xff {
			return tm, ErrSlowPath
		} else {
			tm = time.Unix(int64(binary.BigEndian.Uint32(b[1:])), 0)
		}
	case 0xd7:
		if b, err := r.take(9); err != nil || b[0] != 0xff {
			return tm, ErrSlowPath
		} else {
			v := binary.BigEndian.Uint64(b[1:])
			tm = time.Unix(int64(v&0x00000003ffffffff), int64(v>>34))
		}
	case 0xc7:
		if b, err := r.take(14); err != nil || b[0] != 12 || b[1] != 0xff {
			return tm, ErrSlowPath
		} else {
			tm = time.Unix(int64(binary.BigEndian.Uint64(b[6:])), int64(binary.BigEndian.Uint32(b[2:])))
		}
	default:
		return tm, ErrSlowPath
	}
	if tm.IsZero() {
		tm = tm.UTC()
	}
	return tm, nil
}

// maxSkipDepth bounds how deep Skip follows nested containers; deeper is ErrSlowPath.
const maxSkipDepth = 32

// Skip steps over one value of any type (depth: how deep it is already).
func (r *Reader) Skip(depth int) error {
	if depth > maxSkipDepth {
		return ErrSlowPath
	}
	c, err := r.byte()
	if err != nil {
		return err
	}
	var n, items uint64
	switch {
	case c <= 0x7f || c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		return nil
	case c&0xf0 == 0x80:
		items = 2 * uint64(c&0x0f)
	case c&0xf0 == 0x90:
		items = uint64(c & 0x0f)
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xcc || c == 0xd0:
		n = 1
	case c == 0xcd || c == 0xd1:
		n = 2
	case c == 0xce || c == 0xd2 || c == 0xca:
		n = 4
	case c == 0xcf || c == 0xd3 || c == 0xcb:
		n = 8
	case c == 0xd9 || c == 0xc4:
		n, err = r.n(1)
	case c == 0xda || c == 0xc5:
		n, err = r.n(2)
	case c == 0xdb || c == 0xc6:
		n, err = r.n(4)
	case c == 0xd4:
		n = 2
	case c == 0xd5:
		n = 3
	case c == 0xd6:
		n = 5
	case c == 0xd7:
		n = 9
	case c == 0xd8:
		n = 17
	case c == 0xc7:
		n, err = r.n(1)
		n++
	case c == 0xc8:
		n, err = r.n(2)
		n++
	case c == 0xc9:
		n, err = r.n(4)
		n++
	case c == 0xdc:
		items, err = r.n(2)
	case c == 0xdd:
		items, err = r.n(4)
	case c == 0xde:
		items, err = r.n(2)
		items *= 2
	case c == 0xdf:
		items, err = r.n(4)
		items *= 2
	default:
		return ErrSlowPath
	}
	if err != nil {
		return err
	}
	if _, err := r.take(n); err != nil {
		return err
	}
	if items > uint64(len(r.b)-r.off) {
		// Each item is at least a byte.
		return ErrSlowPath
	}
	for ; items > 0; items-- {
		if err := r.Skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}
