package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/wire"
)

// Media types of the two halves of the API.
const (
	ContentMsgpack = "application/msgpack"
	ContentJSON    = "application/json"
	ContentJSONL   = "application/x-ndjson"
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
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, jobs.Wrap(jobs.CodeBadRequest, err, "the request body did not arrive in time")
		}
		return nil, jobs.Wrap(jobs.CodeBadRequest, err, "read the request body")
	}
	return b, nil
}

// decodeMsgpack decodes a request body into v after checking its shape.
//
// The check is not optional (see wire.Shape): it bounds every container before the decoder
// allocates for it.
func decodeMsgpack(b []byte, v any) error {
	if err := checkMsgpack(b); err != nil {
		return err
	}
	var err error
	switch v := v.(type) {
	case *frontend.RecordRequest:
		// A step's record and a poll: their own codecs (recordcodec.go, pollcodec.go), msgpack's
		// result.
		err = decodeRecordRequest(b, v)
	case *frontend.PollRequest:
		err = decodePollRequest(b, v)
	default:
		err = slowDecode(b, v) // msgpack's decoder, its panics on malformed bodies refused
	}
	if err != nil {
		return jobs.Wrap(jobs.CodeBadRequest, err, "malformed msgpack body")
	}
	return nil
}

func encodeMsgpack(v any) ([]byte, error) { return appendMsgpack(nil, v) }

// appendMsgpack appends v's msgpack encoding to dst. The encoder is msgpack's pooled one and
// the bytes go straight into dst: a framed call's request and answer are encoded into buffers
// their connection keeps, where a fresh encoder and a growing bytes.Buffer per call were a
// tenth of the CPU of a remote step's record on each side of the wire.
func appendMsgpack(dst []byte, v any) ([]byte, error) {
	// A step's record, a poll and their answers: their own encoders (recordcodec.go,
	// pollcodec.go), msgpack's wire.
	switch v := v.(type) {
	case frontend.RecordRequest:
		return appendRecordRequest(dst, &v)
	case *frontend.RecordRequest:
		return appendRecordRequest(dst, v)
	case frontend.RecordResponse:
		return appendRecordResponse(dst, &v), nil
	case *frontend.RecordResponse:
		return appendRecordResponse(dst, v), nil
	case frontend.PollRequest:
		return appendPollRequest(dst, &v)
	case *frontend.PollRequest:
		return appendPollRequest(dst, v)
	case PollResponse:
		return appendPollResponse(dst, &v), nil
	case *PollResponse:
		return appendPollResponse(dst, v), nil
	}
	w := &appendWriter{b: dst}
	enc := msgpack.GetEncoder()
	enc.Reset(w)
	err := enc.Encode(v)
	msgpack.PutEncoder(enc)
	if err != nil {
		return dst, jobs.Wrap(jobs.CodeEncoding, err, "encode %T", v)
	}
	return w.b, nil
}

// appendWriter is the writer msgpack's encoder writes to without a buffer of its own (it
// wraps any writer lacking WriteByte and WriteString in one).
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *appendWriter) WriteByte(c byte) error {
	w.b = append(w.b, c)
	return nil
}

func (w *appendWriter) WriteString(s string) (int, error) {
	w.b = append(w.b, s...)
	return len(s), nil
}

// checkMsgpack refuses a body whose shape could not be decoded safely (see wire.Shape).
func checkMsgpack(b []byte) error { return wire.Shape(b) }

// decodeJSON decodes a JSON request body into v. Unknown fields are refused so that a typo
// ("fromstep") is an error rather than a silently ignored option. An empty body decodes as {}.
func decodeJSON(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := jobs.ValidJSONText(b); err != nil {
		return err
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
