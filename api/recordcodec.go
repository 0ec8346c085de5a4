package api

import (
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/msgp"
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

// appendRecordRequest appends req's msgpack encoding to b.
func appendRecordRequest(b []byte, req *frontend.RecordRequest) ([]byte, error) {
	n := 6
	if req.Retry {
		n++
	}
	if req.Slot != "" {
		n++
	}
	b = msgp.AppendMapLen(b, n)
	b = msgp.AppendStr(msgp.AppendStr(b, "run_id"), req.RunID)
	b = msgp.AppendInt(msgp.AppendStr(b, "fence"), req.Fence)
	b = msgp.AppendStr(msgp.AppendStr(b, "worker_id"), req.WorkerID)
	b = msgp.AppendStr(msgp.AppendStr(b, "lease_token"), req.LeaseToken)
	b = msgp.AppendInt(msgp.AppendStr(b, "after_seq"), req.AfterSeq)
	if req.Retry {
		b = msgp.AppendBool(msgp.AppendStr(b, "retry"), true)
	}
	if req.Slot != "" {
		b = msgp.AppendStr(msgp.AppendStr(b, "slot"), req.Slot)
	}
	b = msgp.AppendStr(b, "commands")
	if req.Commands == nil {
		return append(b, 0xc0), nil
	}
	b = msgp.AppendArrayLen(b, len(req.Commands))
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
		!c.TimeoutAt.IsZero(), c.Lookback != "", c.Sticky, c.RetryAfter != 0, len(c.Codes) > 0, c.Attempt != 0, c.Code != "", c.Error != "", c.Step != "",
		c.Stop != "", !c.RetryAt.IsZero(), !c.ReadyAt.IsZero(), c.Effect != nil, c.Version != 0, c.Parallel, c.Matched} {
		if set {
			n++
		}
	}
	b = msgp.AppendMapLen(b, n)
	b = msgp.AppendStr(msgp.AppendStr(b, "kind"), string(c.Kind))
	str := func(key, v string) {
		if v != "" {
			b = msgp.AppendStr(msgp.AppendStr(b, key), v)
		}
	}
	tm := func(key string, v time.Time) {
		if !v.IsZero() {
			b = msgp.AppendTime(msgp.AppendStr(b, key), v)
		}
	}
	flag := func(key string, v bool) {
		if v {
			b = msgp.AppendBool(msgp.AppendStr(b, key), true)
		}
	}
	num := func(key string, v int) {
		if v != 0 {
			b = msgp.AppendInt(msgp.AppendStr(b, key), int64(v))
		}
	}
	str("name", c.Name)
	if len(c.Output) > 0 {
		b = msgp.AppendBin(msgp.AppendStr(b, "output"), c.Output)
	}
	tm("wake_at", c.WakeAt)
	str("event", c.Event)
	if len(c.Match) > 0 {
		b = msgp.AppendArrayLen(msgp.AppendStr(b, "match"), len(c.Match))
		for _, m := range c.Match {
			b = msgp.AppendStr(b, m)
		}
	}
	tm("timeout_at", c.TimeoutAt)
	str("lookback", c.Lookback)
	flag("sticky", c.Sticky)
	if c.RetryAfter != 0 {
		b = msgp.AppendInt(msgp.AppendStr(b, "retry_after"), int64(c.RetryAfter))
	}
	if len(c.Codes) > 0 {
		b = msgp.AppendArrayLen(msgp.AppendStr(b, "codes"), len(c.Codes))
		for _, s := range c.Codes {
			b = msgp.AppendStr(b, s)
		}
	}
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
		if b, err = appendMsgpack(msgp.AppendStr(b, "effect"), c.Effect); err != nil {
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
	b = msgp.AppendMapLen(b, 3)
	b = appendEvents(msgp.AppendStr(b, "appended"), resp.Appended)
	b = msgp.AppendInt(msgp.AppendStr(b, "last_seq"), resp.LastSeq)
	return msgp.AppendStr(msgp.AppendStr(b, "state"), resp.State)
}

// decodeRecordRequest decodes a record, by the fast path when it can and by msgpack's decoder
// otherwise (the same result; see above).
func decodeRecordRequest(b []byte, req *frontend.RecordRequest) error {
	r := msgp.NewReader(b)
	return fastOrSlow(b, req, recordRequest(&r, req) == nil && r.Done())
}

// decodeRecordResponse decodes a record's answer, as decodeRecordRequest does.
func decodeRecordResponse(b []byte, resp *frontend.RecordResponse) error {
	r := msgp.NewReader(b)
	return fastOrSlow(b, resp, recordResponse(&r, resp) == nil && r.Done())
}

// fastOrSlow is a decode's end: nothing more when the fast path read all of b (fast), else
// msgpack's decoder reads b into a zero v. The fast path is called by its decoder, not through
// here: a call through a function value would move the reader to the heap.
func fastOrSlow[T any](b []byte, v *T, fast bool) error {
	if fast {
		return nil
	}
	var zero T
	*v = zero
	return slowDecode(b, v)
}

// slowDecode is msgpack's decoder, its panics refusals: it panics on some malformed bodies (a
// nil where a time belongs), which are the sender's mistake, not the receiver's. Every msgpack
// body the API reads, on either side of the wire, is decoded through it or the record codec.
// A worker request whose arrays claim more than it may carry is refused before the decoder
// makes anything for them (checkCounts).
func slowDecode(b []byte, v any) (err error) {
	if err := checkCounts(b, v); err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("msgpack: %v", p)
		}
	}()
	return msgpack.Unmarshal(b, v)
}

func recordRequest(r *msgp.Reader, req *frontend.RecordRequest) error {
	return r.Fields(func(key []byte) (err error) {
		switch string(key) {
		case "run_id":
			req.RunID, err = r.Str()
		case "fence":
			req.Fence, err = r.Int()
		case "worker_id":
			req.WorkerID, err = r.Str()
		case "lease_token":
			req.LeaseToken, err = r.Str()
		case "after_seq":
			req.AfterSeq, err = r.Int()
		case "retry":
			req.Retry, err = r.Bool()
		case "slot":
			req.Slot, err = r.Str()
		case "commands":
			var m int
			if m, err = r.ArrayLen(); err == nil {
				if m > maxRecordCommands {
					// Refused by msgpack's path (checkCounts), before anything is made for it.
					return msgp.ErrSlowPath
				}
				req.Commands = nil
				if m >= 0 {
					req.Commands = make([]frontend.Command, m)
				}
				for i := 0; i < m && err == nil; i++ {
					err = command(r, &req.Commands[i])
				}
			}
		default:
			return msgp.ErrSlowPath
		}
		return err
	})
}

func command(r *msgp.Reader, c *frontend.Command) error {
	return r.Fields(func(key []byte) (err error) {
		var v int64
		switch string(key) {
		case "kind":
			var s string
			s, err = r.Str()
			c.Kind = frontend.CommandKind(s)
		case "name":
			c.Name, err = r.Str()
		case "output":
			c.Output, err = r.Bin()
		case "wake_at":
			c.WakeAt, err = r.Time()
		case "event":
			c.Event, err = r.Str()
		case "match":
			c.Match, err = r.Strs()
		case "timeout_at":
			c.TimeoutAt, err = r.Time()
		case "lookback":
			c.Lookback, err = r.Str()
		case "sticky":
			c.Sticky, err = r.Bool()
		case "codes":
			c.Codes, err = r.Strs()
		case "retry_after":
			v, err = r.Int()
			c.RetryAfter = time.Duration(v)
		case "attempt":
			v, err = r.Int()
			c.Attempt = int(v)
		case "code":
			c.Code, err = r.Str()
		case "error":
			c.Error, err = r.Str()
		case "step":
			c.Step, err = r.Str()
		case "stop":
			c.Stop, err = r.Str()
		case "retry_at":
			c.RetryAt, err = r.Time()
		case "ready_at":
			c.ReadyAt, err = r.Time()
		case "effect":
			// Rare: msgpack's decoder reads it, from its own bytes.
			var raw []byte
			if raw, err = r.Raw(); err == nil {
				if raw[0] == 0xc0 {
					c.Effect = nil
				} else {
					c.Effect = &frontend.Effect{}
					err = slowDecode(raw, c.Effect)
				}
			}
		case "version":
			v, err = r.Int()
			c.Version = int(v)
		case "parallel":
			c.Parallel, err = r.Bool()
		case "matched":
			c.Matched, err = r.Bool()
		default:
			return msgp.ErrSlowPath
		}
		return err
	})
}

func recordResponse(r *msgp.Reader, resp *frontend.RecordResponse) error {
	return r.Fields(func(key []byte) (err error) {
		switch string(key) {
		case "appended":
			resp.Appended, err = events(r)
		case "last_seq":
			resp.LastSeq, err = r.Int()
		case "state":
			resp.State, err = r.Str()
		default:
			return msgp.ErrSlowPath
		}
		return err
	})
}

func event(r *msgp.Reader, e *history.Event) error {
	return r.Fields(func(key []byte) (err error) {
		switch string(key) {
		case "seq":
			e.Seq, err = r.Int()
		case "kind":
			var s string
			s, err = r.Str()
			e.Kind = history.Kind(s)
		case "name":
			e.Name, err = r.Str()
		case "at":
			e.At, err = r.Time()
		case "data":
			e.Data, err = r.Bin()
		default:
			return msgp.ErrSlowPath
		}
		return err
	})
}
