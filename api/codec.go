package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
)

// Media types of the two halves of the API.
const (
	ContentMsgpack = "application/msgpack"
	ContentJSON    = "application/json"
	ContentJSONL   = "application/x-ndjson"
)

// Limits of the msgpack shape check. Real requests are far inside them: a record carries a
// handful of commands, a heartbeat one lease per run a worker holds.
const (
	maxMsgpackDepth     = 32
	maxMsgpackContainer = 1 << 16
)

// readBody reads a request body whole, under the server's size limit (set by the middleware's
// http.MaxBytesReader), and turns the limit into X_PAYLOAD_TOO_LARGE.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, jobs.Errorf(jobs.CodePayloadTooLarge, "the request body is over the limit of %d bytes", tooBig.Limit)
		}
		return nil, jobs.Wrap(jobs.CodeBadRequest, err, "read the request body")
	}
	return b, nil
}

// decodeMsgpack decodes a request body into v after checking its shape.
//
// The check is not optional. msgpack/v5 (as of v5.4.1) allocates a struct slice to the length
// an array header claims before it reads a single element, so a five-byte body claiming 2^32
// commands is a multi-gigabyte allocation or a panic. Walking the bytes first bounds every
// container by the bytes that follow it and by maxMsgpackContainer, and the nesting by
// maxMsgpackDepth, before the decoder sees them.
func decodeMsgpack(b []byte, v any) error {
	if err := checkMsgpack(b); err != nil {
		return err
	}
	if err := msgpack.Unmarshal(b, v); err != nil {
		return jobs.Wrap(jobs.CodeBadRequest, err, "malformed msgpack body")
	}
	return nil
}

func encodeMsgpack(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.Encode(v); err != nil {
		return nil, jobs.Wrap(jobs.CodeEncoding, err, "encode %T", v)
	}
	return buf.Bytes(), nil
}

// checkMsgpack walks one msgpack value and refuses truncated data, trailing data, the reserved
// byte 0xc1, containers claiming more items than there are bytes left (every item takes at
// least one) or than maxMsgpackContainer, and nesting deeper than maxMsgpackDepth.
func checkMsgpack(b []byte) error {
	bad := func(pos int, what string) error {
		return jobs.Errorf(jobs.CodeBadRequest, "malformed msgpack body at byte %d: %s", pos, what)
	}
	if len(b) == 0 {
		return bad(0, "empty body")
	}
	// open holds the items still to read in each open container; the bottom one is the single
	// top-level value.
	open := []uint64{1}
	pos := 0
	for len(open) > 0 {
		top := len(open) - 1
		if open[top] == 0 {
			open = open[:top]
			continue
		}
		open[top]--
		if pos >= len(b) {
			return bad(pos, "truncated")
		}
		c := b[pos]
		pos++
		var skip, items uint64
		container := false
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
			items, container = 2*uint64(c&0x0f), true
		case c >= 0x90 && c <= 0x9f:
			items, container = uint64(c&0x0f), true
		case c >= 0xa0 && c <= 0xbf:
			skip = uint64(c & 0x1f)
		case c == 0xc1:
			return bad(pos-1, "reserved byte 0xc1")
		case c == 0xc4, c == 0xd9: // bin8, str8
			skip, ok = size(1)
		case c == 0xc5, c == 0xda: // bin16, str16
			skip, ok = size(2)
		case c == 0xc6, c == 0xdb: // bin32, str32
			skip, ok = size(4)
		case c == 0xc7: // ext8: length, type, data
			skip, ok = size(1)
			skip++
		case c == 0xc8:
			skip, ok = size(2)
			skip++
		case c == 0xc9:
			skip, ok = size(4)
			skip++
		case c == 0xca, c == 0xce, c == 0xd2: // 4-byte numbers
			skip = 4
		case c == 0xcb, c == 0xcf, c == 0xd3: // 8-byte numbers
			skip = 8
		case c == 0xcc, c == 0xd0:
			skip = 1
		case c == 0xcd, c == 0xd1:
			skip = 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16: type byte + data
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc:
			items, ok = size(2)
			container = true
		case c == 0xdd:
			items, ok = size(4)
			container = true
		case c == 0xde:
			items, ok = size(2)
			items *= 2
			container = true
		case c == 0xdf:
			items, ok = size(4)
			items *= 2
			container = true
		}
		if !ok {
			return bad(pos, "truncated length")
		}
		left := uint64(len(b) - pos)
		if container {
			switch {
			case items > maxMsgpackContainer:
				return bad(pos, "a container of more than 65536 items")
			case items > left:
				return bad(pos, "a container claims more items than the body holds")
			case len(open) >= maxMsgpackDepth:
				return bad(pos, "nested too deep")
			}
			open = append(open, items)
			continue
		}
		if skip > left {
			return bad(pos, "truncated")
		}
		pos += int(skip)
	}
	if pos != len(b) {
		return bad(pos, "trailing data after the value")
	}
	return nil
}

// decodeJSON decodes a JSON request body into v. Unknown fields are refused so that a typo
// ("fromstep") is an error rather than a silently ignored option. An empty body decodes as {}.
func decodeJSON(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jobs.Wrap(jobs.CodeBadRequest, err, "malformed JSON body")
	}
	if dec.More() {
		return jobs.Errorf(jobs.CodeBadRequest, "malformed JSON body: trailing data")
	}
	return nil
}

// isMsgpack reports whether a request's body is declared msgpack.
func isMsgpack(r *http.Request) bool { return mediaType(r) == ContentMsgpack }

// isJSON reports whether a request's body is declared JSON.
func isJSON(r *http.Request) bool { return mediaType(r) == ContentJSON }

func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// checkText refuses an identifier that a store could not keep as text: invalid UTF-8 or a NUL
// byte (Postgres refuses both, and it would answer with a store error, a 503, for what is the
// caller's mistake).
func checkText(field, v string) error {
	if !utf8.ValidString(v) {
		return jobs.Errorf(jobs.CodeBadRequest, "%s is not valid UTF-8", field)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return jobs.Errorf(jobs.CodeBadRequest, "%s holds a NUL byte", field)
	}
	return nil
}

// cleanText makes free text (an error message a job returned) storable rather than refusing
// it: the message is for people, and refusing it would lose the failure it reports.
func cleanText(v string) string {
	if utf8.ValidString(v) && strings.IndexByte(v, 0) < 0 {
		return v
	}
	return strings.ReplaceAll(strings.ToValidUTF8(v, "\uFFFD"), "\x00", "\uFFFD")
}
