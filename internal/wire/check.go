// Package wire checks msgpack bytes before anything decodes or stores them. It is shared by the
// HTTP API (request bodies) and the engine (values a worker or caller asks it to store), so both
// refuse the same things with the same words.
package wire

import (
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
)

// Limits of the shape check. Real requests are far inside them: a record carries a handful of
// commands, a heartbeat one lease per run a worker holds, and the largest request, a bulk
// enqueue of jobs.MaxEnqueueMany runs, about a dozen entries per run.
const (
	MaxDepth     = 32
	MaxContainer = 1 << 16
	// MaxEntries bounds the entries of one body in all (Shape): every array element and every
	// map entry (a key and its value) of every container counts one.
	MaxEntries = 1 << 20
)

// The seconds since 1970 of the first and last instants of the years 0 to 9999, the times JSON
// (RFC 3339) can write.
const (
	minJSONSeconds = -62167219200
	maxJSONSeconds = 253402300799
)

// Shape walks one msgpack value and refuses truncated data, trailing data, the reserved byte
// 0xc1, containers claiming more items than there are bytes left (every item takes at least
// one) or than MaxContainer, more than MaxEntries entries in all, and nesting deeper than
// MaxDepth.
//
// The check is not optional before decoding a request: msgpack/v5 (as of v5.4.1) allocates a
// struct slice to the length an array header claims before it reads a single element, so a
// five-byte body claiming 2^32 commands is a multi-gigabyte allocation or a panic. The bound on
// each container alone is not enough: an element of one byte (an empty map) is a whole struct
// once decoded, a few hundred bytes, so a body of many full containers made a heap hundreds of
// times its size. MaxEntries bounds what any decoder makes for one body to MaxEntries times
// its largest element, whatever the body limit; the handlers' own limits (a record's commands,
// a heartbeat's leases, a batch's records) are tighter, and checked before their slices are
// made.
func Shape(b []byte) error { return walk(b, false) }

// Value is Shape plus what makes a stored value readable by every surface that renders it: every
// string (map keys included) is valid UTF-8, and every float is finite. A NaN or an infinity has
// no JSON form, so a stored one would make the run's history unreadable in the admin API and the
// CLI; an invalid string would be rendered as U+FFFD by one surface and refused by another.
func Value(b []byte) error { return walk(b, true) }

func walk(b []byte, values bool) error {
	bad := func(pos int, what string) error {
		return jobs.Errorf(jobs.CodeBadRequest, "malformed msgpack at byte %d: %s", pos, what)
	}
	if len(b) == 0 {
		return bad(0, "empty")
	}
	// open holds the items still to read in each open container (and whether it is a map, whose
	// items alternate key and value); the bottom one is the single top-level value.
	type level struct {
		left  uint64
		isMap bool
	}
	open := []level{{left: 1}}
	pos := 0
	var entries uint64 // of the containers opened so far (Shape only; see MaxEntries)
	for len(open) > 0 {
		top := len(open) - 1
		if open[top].left == 0 {
			open = open[:top]
			continue
		}
		isKey := open[top].isMap && open[top].left%2 == 0
		open[top].left--
		if pos >= len(b) {
			return bad(pos, "truncated")
		}
		start := pos // where this value begins
		c := b[pos]
		pos++
		var skip, items uint64
		container, str, isMap := false, false, false
		extType := -1 // the byte offset of an ext's type, when the value is an ext
		// size reads an n-byte big-endian length.
		size := func(n int) (uint64, bool) {
			if len(b)-pos < n {
				return 0, false
			}
			var v uint64
			switch n {
			case 1:
				v = uint64(b[pos])
			case 2:
				v = uint64(binary.BigEndian.Uint16(b[pos:]))
			case 4:
				v = uint64(binary.BigEndian.Uint32(b[pos:]))
			}
			pos += n
			return v, true
		}
		ok := true
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
			// fixints, nil, booleans: the byte is the value
		case c >= 0x80 && c <= 0x8f:
			items, container, isMap = 2*uint64(c&0x0f), true, true
		case c >= 0x90 && c <= 0x9f:
			items, container = uint64(c&0x0f), true
		case c >= 0xa0 && c <= 0xbf:
			skip, str = uint64(c&0x1f), true
		case c == 0xc1:
			return bad(pos-1, "reserved byte 0xc1")
		case c == 0xc4: // bin8
			skip, ok = size(1)
		case c == 0xc5:
			skip, ok = size(2)
		case c == 0xc6:
			skip, ok = size(4)
		case c == 0xd9: // str8
			skip, ok = size(1)
			str = true
		case c == 0xda:
			skip, ok = size(2)
			str = true
		case c == 0xdb:
			skip, ok = size(4)
			str = true
		case c == 0xc7: // ext8: length, type, data
			skip, ok = size(1)
			skip++
			extType = pos
		case c == 0xc8:
			skip, ok = size(2)
			skip++
			extType = pos
		case c == 0xc9:
			skip, ok = size(4)
			skip++
			extType = pos
		case c == 0xca: // float32
			skip = 4
			if values && len(b)-pos >= 4 {
				f := float64(math.Float32frombits(binary.BigEndian.Uint32(b[pos:])))
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return bad(pos-1, "a float that is NaN or infinite")
				}
			}
		case c == 0xcb: // float64
			skip = 8
			if values && len(b)-pos >= 8 {
				f := math.Float64frombits(binary.BigEndian.Uint64(b[pos:]))
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return bad(pos-1, "a float that is NaN or infinite")
				}
			}
		case c == 0xce, c == 0xd2: // 4-byte ints
			skip = 4
		case c == 0xcf, c == 0xd3: // 8-byte ints
			skip = 8
		case c == 0xcc, c == 0xd0:
			skip = 1
		case c == 0xcd, c == 0xd1:
			skip = 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16: type byte + data
			skip = 1 + 1<<(c-0xd4)
			extType = pos
		case c == 0xdc:
			items, ok = size(2)
			container = true
		case c == 0xdd:
			items, ok = size(4)
			container = true
		case c == 0xde:
			items, ok = size(2)
			items *= 2
			container, isMap = true, true
		case c == 0xdf:
			items, ok = size(4)
			items *= 2
			container, isMap = true, true
		}
		if values && isKey && !str {
			// A JSON object's keys are strings; a map keyed otherwise has no JSON form.
			return bad(pos-1, "a map key that is not a string")
		}
		if values && extType >= 0 && ok {
			// The extensions every surface reads: the timestamp (type -1), and a payload codec's
			// envelope (codec.ExtType), which surfaces show as such without decoding it.
			if extType >= len(b) || (b[extType] != 0xff && b[extType] != codec.ExtType) {
				return bad(pos-1, "an extension type other than the timestamp or a codec envelope")
			}
			if n := skip - 1; b[extType] == 0xff && n != 4 && n != 8 && n != 12 {
				return bad(pos-1, "a timestamp of a length msgpack does not define")
			}
			if b[extType] == 0xff && skip-1 == 12 && extType+13 <= len(b) {
				// Only the 12-byte form reaches past the year 2514 (or before 1970). A time
				// outside the years 0 to 9999 has no JSON form: every surface that shows the
				// value (a history dump, a retention archive, the API's views) would fail on it.
				nanos := binary.BigEndian.Uint32(b[extType+1:])
				secs := int64(binary.BigEndian.Uint64(b[extType+5:]))
				if nanos >= 1e9 || secs < minJSONSeconds || secs > maxJSONSeconds {
					return bad(pos-1, "a timestamp outside the years 0 to 9999 (or with nanoseconds past a second)")
				}
			}
		}
		if !ok {
			return bad(pos, "truncated length")
		}
		left := uint64(len(b) - pos)
		if container {
			switch {
			case items > MaxContainer:
				return bad(pos, "a container of more than 65536 items")
			case items > left:
				return bad(pos, "a container claims more items than the body holds")
			case len(open) >= MaxDepth:
				return bad(pos, "nested too deep")
			}
			if !values {
				// A stored value is bytes to the engine, decoded by the job that reads it: only
				// a request, which the engine decodes, has a budget of entries.
				if isMap {
					entries += items / 2
				} else {
					entries += items
				}
				if entries > MaxEntries {
					return bad(pos, "more than 1048576 array elements and map entries in all")
				}
			}
			open = append(open, level{left: items, isMap: isMap})
			continue
		}
		if skip > left {
			return bad(pos, "truncated")
		}
		if values && extType >= 0 && b[extType] == codec.ExtType && !codec.IsEnvelope(b[start:pos+int(skip)]) {
			// An envelope every surface shows (codec.Describe) and a codec opens: one Seal
			// writes. Another body under the envelope's type (a fixext form, an id of no bytes,
			// one longer than the body) was stored and then shown by no surface: every view of
			// the value failed on an extension msgpack does not know.
			return bad(start, "a codec envelope that is not well formed")
		}
		if values && str && !utf8.Valid(b[pos:pos+int(skip)]) {
			return bad(pos, "a string that is not valid UTF-8")
		}
		pos += int(skip)
	}
	if pos != len(b) {
		return bad(pos, "trailing data after the value")
	}
	return nil
}
