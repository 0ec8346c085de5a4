package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
)

// The step record's own msgpack codec: frontend.RecordRequest (the worker encodes, the engine
// decodes) and frontend.RecordResponse (the other way). A remote step is one record, and a CPU
// profile of the remote ten-step pass put msgpack's reflection over these two types at about a
// tenth of the engine's CPU and a fifth of each worker process's. The wire does not change:
// the encoder writes the maps msgpack's struct encoding writes (the same keys, the same
// omitempty rules), which any decoder reads; the decoder reads exactly those shapes and hands
// anything else (another key order is fine; an array for a struct, an integer where a string
// belongs, a time in another format, a value nested past the bound) back to msgpack's own
// decoder, so what is accepted and what is refused, and how, stays msgpack's.

// errSlowPath says the fast decoder met a shape it does not read; msgpack's decoder decides.
var errSlowPath = errors.New("api: not a shape the record codec reads")

// appendRecordRequest appends req's msgpack encoding to b.
func appendRecordRequest(b []byte, req *frontend.RecordRequest) ([]byte, error) {
	n := 6
	if req.Retry {
		n++
	}
	if req.Slot != "" {
		n++
	}
	b = appendMapLen(b, n)
	b = appendStr(appendStr(b, "run_id"), req.RunID)
	b = appendInt(appendStr(b, "fence"), req.Fence)
	b = appendStr(appendStr(b, "worker_id"), req.WorkerID)
	b = appendStr(appendStr(b, "lease_token"), req.LeaseToken)
	b = appendInt(appendStr(b, "after_seq"), req.AfterSeq)
	if req.Retry {
		b = appendBool(appendStr(b, "retry"), true)
	}
	if req.Slot != "" {
		b = appendStr(appendStr(b, "slot"), req.Slot)
	}
	b = appendStr(b, "commands")
	if req.Commands == nil {
		return append(b, 0xc0), nil
	}
	b = appendArrayLen(b, len(req.Commands))
	var err error
	for i := range req.Commands {
		if b, err = appendCommand(b, &req.Commands[i]); err != nil {
			return b, err
		}
	}
	return b, nil
}

func appendCommand(b []byte, c *frontend.Command) ([]byte, error) {
	// kind is always there; each other field only when not empty (omitempty).
	n := 1
	for _, set := range [...]bool{c.Name != "", len(c.Output) > 0, !c.WakeAt.IsZero(), c.Event != "", len(c.Match) > 0,
		!c.TimeoutAt.IsZero(), c.Lookback != "", c.Sticky, c.Attempt != 0, c.Code != "", c.Error != "", c.Step != "",
		c.Stop != "", !c.RetryAt.IsZero(), !c.ReadyAt.IsZero(), c.Effect != nil, c.Version != 0, c.Parallel, c.Matched} {
		if set {
			n++
		}
	}
	b = appendMapLen(b, n)
	b = appendStr(appendStr(b, "kind"), string(c.Kind))
	str := func(key, v string) {
		if v != "" {
			b = appendStr(appendStr(b, key), v)
		}
	}
	tm := func(key string, v time.Time) {
		if !v.IsZero() {
			b = appendTime(appendStr(b, key), v)
		}
	}
	flag := func(key string, v bool) {
		if v {
			b = appendBool(appendStr(b, key), true)
		}
	}
	num := func(key string, v int) {
		if v != 0 {
			b = appendInt(appendStr(b, key), int64(v))
		}
	}
	str("name", c.Name)
	if len(c.Output) > 0 {
		b = appendBin(appendStr(b, "output"), c.Output)
	}
	tm("wake_at", c.WakeAt)
	str("event", c.Event)
	if len(c.Match) > 0 {
		b = appendArrayLen(appendStr(b, "match"), len(c.Match))
		for _, m := range c.Match {
			b = appendStr(b, m)
		}
	}
	tm("timeout_at", c.TimeoutAt)
	str("lookback", c.Lookback)
	flag("sticky", c.Sticky)
	num("attempt", c.Attempt)
	str("code", c.Code)
	str("error", c.Error)
	str("step", c.Step)
	str("stop", c.Stop)
	tm("retry_at", c.RetryAt)
	tm("ready_at", c.ReadyAt)
	if c.Effect != nil {
		// Rare (an in-run publish or enqueue): msgpack's own encoding of it.
		var err error
		if b, err = appendMsgpack(appendStr(b, "effect"), c.Effect); err != nil {
			return b, err
		}
	}
	num("version", c.Version)
	flag("parallel", c.Parallel)
	flag("matched", c.Matched)
	return b, nil
}

// appendRecordResponse appends resp's msgpack encoding to b.
func appendRecordResponse(b []byte, resp *frontend.RecordResponse) []byte {
	b = appendMapLen(b, 3)
	b = appendStr(b, "appended")
	if resp.Appended == nil {
		b = append(b, 0xc0)
	} else {
		b = appendArrayLen(b, len(resp.Appended))
		for i := range resp.Appended {
			e := &resp.Appended[i]
			n := 4
			if e.Name != "" {
				n++
			}
			b = appendMapLen(b, n)
			b = appendInt(appendStr(b, "seq"), e.Seq)
			b = appendStr(appendStr(b, "kind"), string(e.Kind))
			if e.Name != "" {
				b = appendStr(appendStr(b, "name"), e.Name)
			}
			b = appendTime(appendStr(b, "at"), e.At)
			b = appendBin(appendStr(b, "data"), e.Data)
		}
	}
	b = appendInt(appendStr(b, "last_seq"), resp.LastSeq)
	return appendStr(appendStr(b, "state"), resp.State)
}

// decodeRecordRequest decodes a record, by the fast path when it can and by msgpack's decoder
// otherwise (the same result; see above).
func decodeRecordRequest(b []byte, req *frontend.RecordRequest) error {
	r := reader{b: b}
	if r.recordRequest(req) == nil && r.off == len(b) {
		return nil
	}
	*req = frontend.RecordRequest{}
	return slowDecode(b, req)
}

// decodeRecordResponse decodes a record's answer, as decodeRecordRequest does.
func decodeRecordResponse(b []byte, resp *frontend.RecordResponse) error {
	r := reader{b: b}
	if r.recordResponse(resp) == nil && r.off == len(b) {
		return nil
	}
	*resp = frontend.RecordResponse{}
	return slowDecode(b, resp)
}

// slowDecode is msgpack's decoder, its panics refusals: it panics on some malformed bodies (a
// nil where a time belongs), which are the sender's mistake, not the receiver's. Every msgpack
// body the API reads, on either side of the wire, is decoded through it or the record codec.
func slowDecode(b []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("msgpack: %v", p)
		}
	}()
	return msgpack.Unmarshal(b, v)
}

func (r *reader) recordRequest(req *frontend.RecordRequest) error {
	return r.fields(func(key []byte) (err error) {
		switch string(key) {
		case "run_id":
			req.RunID, err = r.str()
		case "fence":
			req.Fence, err = r.int()
		case "worker_id":
			req.WorkerID, err = r.str()
		case "lease_token":
			req.LeaseToken, err = r.str()
		case "after_seq":
			req.AfterSeq, err = r.int()
		case "retry":
			req.Retry, err = r.bool()
		case "slot":
			req.Slot, err = r.str()
		case "commands":
			var m int
			if m, err = r.arrayLen(); err == nil {
				req.Commands = nil
				if m >= 0 {
					req.Commands = make([]frontend.Command, m)
				}
				for i := 0; i < m && err == nil; i++ {
					err = r.command(&req.Commands[i])
				}
			}
		default:
			return errSlowPath
		}
		return err
	})
}

func (r *reader) command(c *frontend.Command) error {
	return r.fields(func(key []byte) (err error) {
		var v int64
		switch string(key) {
		case "kind":
			var s string
			s, err = r.str()
			c.Kind = frontend.CommandKind(s)
		case "name":
			c.Name, err = r.str()
		case "output":
			c.Output, err = r.bin()
		case "wake_at":
			c.WakeAt, err = r.time()
		case "event":
			c.Event, err = r.str()
		case "match":
			var m int
			if m, err = r.arrayLen(); err == nil {
				c.Match = nil
				if m >= 0 {
					c.Match = make([]string, m)
				}
				for i := 0; i < m && err == nil; i++ {
					c.Match[i], err = r.str()
				}
			}
		case "timeout_at":
			c.TimeoutAt, err = r.time()
		case "lookback":
			c.Lookback, err = r.str()
		case "sticky":
			c.Sticky, err = r.bool()
		case "attempt":
			v, err = r.int()
			c.Attempt = int(v)
		case "code":
			c.Code, err = r.str()
		case "error":
			c.Error, err = r.str()
		case "step":
			c.Step, err = r.str()
		case "stop":
			c.Stop, err = r.str()
		case "retry_at":
			c.RetryAt, err = r.time()
		case "ready_at":
			c.ReadyAt, err = r.time()
		case "effect":
			// Rare: msgpack's decoder reads it, from its own bytes.
			start := r.off
			if err = r.skip(0); err == nil {
				if r.b[start] == 0xc0 {
					c.Effect = nil
				} else {
					c.Effect = &frontend.Effect{}
					err = slowDecode(r.b[start:r.off], c.Effect)
				}
			}
		case "version":
			v, err = r.int()
			c.Version = int(v)
		case "parallel":
			c.Parallel, err = r.bool()
		case "matched":
			c.Matched, err = r.bool()
		default:
			return errSlowPath
		}
		return err
	})
}

func (r *reader) recordResponse(resp *frontend.RecordResponse) error {
	return r.fields(func(key []byte) (err error) {
		switch string(key) {
		case "appended":
			var m int
			if m, err = r.arrayLen(); err == nil {
				resp.Appended = nil
				if m >= 0 {
					resp.Appended = make([]history.Event, m)
				}
				for i := 0; i < m && err == nil; i++ {
					err = r.event(&resp.Appended[i])
				}
			}
		case "last_seq":
			resp.LastSeq, err = r.int()
		case "state":
			resp.State, err = r.str()
		default:
			return errSlowPath
		}
		return err
	})
}

func (r *reader) event(e *history.Event) error {
	return r.fields(func(key []byte) (err error) {
		switch string(key) {
		case "seq":
			e.Seq, err = r.int()
		case "kind":
			var s string
			s, err = r.str()
			e.Kind = history.Kind(s)
		case "name":
			e.Name, err = r.str()
		case "at":
			e.At, err = r.time()
		case "data":
			e.Data, err = r.bin()
		default:
			return errSlowPath
		}
		return err
	})
}

// fields reads a map: each key once (a key named twice goes to msgpack's decoder, see keySet),
// handed to field, which reads its value or answers errSlowPath for a key it does not know.
func (r *reader) fields(field func(key []byte) error) error {
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	var seen keySet
	for ; n > 0; n-- {
		key, err := r.key()
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
			return errSlowPath
		}
	}
	if k.n == len(k.keys) {
		return errSlowPath
	}
	k.keys[k.n] = key
	k.n++
	return nil
}

// Writing msgpack (the smallest form of each, as msgpack's encoder writes them).

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xde, byte(n>>8), byte(n))
	}
	return append(b, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xdc, byte(n>>8), byte(n))
	}
	return append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendStr(b []byte, s string) []byte {
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

func appendBin(b []byte, v []byte) []byte {
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

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

func appendInt(b []byte, v int64) []byte {
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

// appendTime writes t as the msgpack timestamp extension (-1), as msgpack's encoder does.
func appendTime(b []byte, t time.Time) []byte {
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

// Reading msgpack: only the forms the types above are written in; anything else is
// errSlowPath.

type reader struct {
	b   []byte
	off int
}

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errSlowPath
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

// n reads a big-endian unsigned integer of size bytes.
func (r *reader) n(size int) (uint64, error) {
	if len(r.b)-r.off < size {
		return 0, errSlowPath
	}
	var v uint64
	for _, c := range r.b[r.off : r.off+size] {
		v = v<<8 | uint64(c)
	}
	r.off += size
	return v, nil
}

func (r *reader) take(n uint64) ([]byte, error) {
	if uint64(len(r.b)-r.off) < n {
		return nil, errSlowPath
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v, nil
}

func (r *reader) mapLen() (int, error) {
	c, err := r.byte()
	switch {
	case err != nil:
		return 0, err
	case c&0xf0 == 0x80:
		return int(c & 0x0f), nil
	case c == 0xde:
		n, err := r.n(2)
		return int(n), err
	case c == 0xdf:
		n, err := r.n(4)
		return int(n), err
	}
	// nil (the zero value) and anything else: msgpack's decoder.
	return 0, errSlowPath
}

// arrayLen is -1 for nil.
func (r *reader) arrayLen() (int, error) {
	c, err := r.byte()
	switch {
	case err != nil:
		return 0, err
	case c&0xf0 == 0x90:
		return r.items(uint64(c&0x0f), nil)
	case c == 0xc0:
		return -1, nil
	case c == 0xdc:
		n, err := r.n(2)
		return r.items(n, err)
	case c == 0xdd:
		n, err := r.n(4)
		return r.items(n, err)
	}
	return 0, errSlowPath
}

// items is an array's length, refused (to msgpack's decoder, which refuses it too) when the
// rest of the body cannot hold that many items of a byte each: nothing is made for a length a
// few bytes claim.
func (r *reader) items(n uint64, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	if n > uint64(len(r.b)-r.off) {
		return 0, errSlowPath
	}
	return int(n), nil
}

// strBytes reads a str (or nil, as "") without copying.
func (r *reader) strBytes() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9:
		n, err = r.n(1)
	case c == 0xda:
		n, err = r.n(2)
	case c == 0xdb:
		n, err = r.n(4)
	case c == 0xc0:
		return nil, nil
	default:
		return nil, errSlowPath
	}
	if err != nil {
		return nil, err
	}
	return r.take(n)
}

func (r *reader) key() ([]byte, error) { return r.strBytes() }

func (r *reader) str() (string, error) {
	b, err := r.strBytes()
	return string(b), err
}

// bin reads bin (a copy) or nil.
func (r *reader) bin() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc4:
		n, err = r.n(1)
	case 0xc5:
		n, err = r.n(2)
	case 0xc6:
		n, err = r.n(4)
	default:
		return nil, errSlowPath
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

func (r *reader) bool() (bool, error) {
	c, err := r.byte()
	switch {
	case err != nil:
		return false, err
	case c == 0xc3:
		return true, nil
	case c == 0xc2 || c == 0xc0:
		return false, nil
	}
	return false, errSlowPath
}

func (r *reader) int() (int64, error) {
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
		return 0, errSlowPath
	}
	return int64(v), err
}

// time reads the timestamp extension as msgpack's decoder does (time.Unix, UTC for the zero
// time), and nil as the zero time; other forms go to msgpack's decoder.
func (r *reader) time() (time.Time, error) {
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
			return tm, errSlowPath
		} else {
			tm = time.Unix(int64(binary.BigEndian.Uint32(b[1:])), 0)
		}
	case 0xd7:
		if b, err := r.take(9); err != nil || b[0] != 0xff {
			return tm, errSlowPath
		} else {
			v := binary.BigEndian.Uint64(b[1:])
			tm = time.Unix(int64(v&0x00000003ffffffff), int64(v>>34))
		}
	case 0xc7:
		if b, err := r.take(14); err != nil || b[0] != 12 || b[1] != 0xff {
			return tm, errSlowPath
		} else {
			tm = time.Unix(int64(binary.BigEndian.Uint64(b[6:])), int64(binary.BigEndian.Uint32(b[2:])))
		}
	default:
		return tm, errSlowPath
	}
	if tm.IsZero() {
		tm = tm.UTC()
	}
	return tm, nil
}

// maxSkipDepth bounds how deep skip follows nested containers; deeper is errSlowPath.
const maxSkipDepth = 32

// skip steps over one value of any type.
func (r *reader) skip(depth int) error {
	if depth > maxSkipDepth {
		return errSlowPath
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
		return errSlowPath
	}
	if err != nil {
		return err
	}
	if _, err := r.take(n); err != nil {
		return err
	}
	if items > uint64(len(r.b)-r.off) {
		// Each item is at least a byte.
		return errSlowPath
	}
	for ; items > 0; items-- {
		if err := r.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}
