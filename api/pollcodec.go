package api

import (
	"time"

	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/msgp"
)

// The poll's own msgpack codec, as the record's (recordcodec.go, whose rules it follows): a
// frontend.PollRequest (the worker encodes, the engine decodes) and a PollResponse, the claimed
// tasks (the other way). CPU profiles of the remote no-op pass (20,000 tasks in about 2,100
// polls) put msgpack's reflection over these at about 4% of the engine's CPU and 7% of each
// worker process's. The wire does not change: the encoder writes what msgpack's struct encoding
// writes, and the decoder hands any other shape back to msgpack's decoder.

// appendPollRequest appends req's msgpack encoding to b.
func appendPollRequest(b []byte, req *frontend.PollRequest) ([]byte, error) {
	n := 4
	if len(req.Limits) > 0 {
		n++
	}
	b = msgp.AppendMapLen(b, n)
	b = msgp.AppendStr(msgp.AppendStr(b, "worker_id"), req.WorkerID)
	b = msgp.AppendStr(b, "queues")
	if req.Queues == nil {
		b = append(b, 0xc0)
	} else {
		b = msgp.AppendArrayLen(b, len(req.Queues))
		for _, q := range req.Queues {
			b = msgp.AppendStr(b, q)
		}
	}
	b = msgp.AppendInt(msgp.AppendStr(b, "max"), int64(req.Max))
	b = msgp.AppendInt(msgp.AppendStr(b, "wait"), int64(req.Wait))
	if len(req.Limits) > 0 {
		// Only older workers send it, and the engine ignores it: msgpack's own encoding.
		return appendMsgpack(msgp.AppendStr(b, "limits"), req.Limits)
	}
	return b, nil
}

// appendPollResponse appends resp's msgpack encoding to b.
func appendPollResponse(b []byte, resp *PollResponse) []byte {
	b = msgp.AppendMapLen(b, 1)
	b = msgp.AppendStr(b, "tasks")
	if resp.Tasks == nil {
		return append(b, 0xc0)
	}
	b = msgp.AppendArrayLen(b, len(resp.Tasks))
	for i := range resp.Tasks {
		b = appendTask(b, &resp.Tasks[i])
	}
	return b
}

func appendTask(b []byte, t *frontend.Task) []byte {
	// Eleven fields always; the others only when not empty (omitempty).
	n := 11
	for _, set := range [...]bool{t.Tenant != "", t.NoTenant, t.EnqueuedBy != "", t.TraceParent != "",
		t.TraceState != "", len(t.Tail) > 0} {
		if set {
			n++
		}
	}
	b = msgp.AppendMapLen(b, n)
	b = msgp.AppendStr(msgp.AppendStr(b, "run_id"), t.RunID)
	b = msgp.AppendStr(msgp.AppendStr(b, "job"), t.Job)
	b = msgp.AppendStr(msgp.AppendStr(b, "queue"), t.Queue)
	b = msgp.AppendInt(msgp.AppendStr(b, "fence"), t.Fence)
	b = msgp.AppendInt(msgp.AppendStr(b, "attempt"), int64(t.Attempt))
	b = msgp.AppendBin(msgp.AppendStr(b, "input"), t.Input)
	b = msgp.AppendStr(msgp.AppendStr(b, "key"), t.Key)
	if t.Tenant != "" {
		b = msgp.AppendStr(msgp.AppendStr(b, "tenant"), t.Tenant)
	}
	if t.NoTenant {
		b = msgp.AppendBool(msgp.AppendStr(b, "no_tenant"), true)
	}
	if t.EnqueuedBy != "" {
		b = msgp.AppendStr(msgp.AppendStr(b, "enqueued_by"), t.EnqueuedBy)
	}
	b = msgp.AppendInt(msgp.AppendStr(b, "last_seq"), t.LastSeq)
	b = msgp.AppendTime(msgp.AppendStr(b, "lease_until"), t.LeaseUntil)
	b = msgp.AppendInt(msgp.AppendStr(b, "lease"), int64(t.Lease))
	b = msgp.AppendStr(msgp.AppendStr(b, "lease_token"), t.LeaseToken)
	if t.TraceParent != "" {
		b = msgp.AppendStr(msgp.AppendStr(b, "traceparent"), t.TraceParent)
	}
	if t.TraceState != "" {
		b = msgp.AppendStr(msgp.AppendStr(b, "tracestate"), t.TraceState)
	}
	if len(t.Tail) > 0 {
		b = appendEvents(msgp.AppendStr(b, "tail"), t.Tail)
	}
	return b
}

// decodePollRequest decodes a poll, as decodeRecordRequest decodes a record.
func decodePollRequest(b []byte, req *frontend.PollRequest) error {
	r := msgp.NewReader(b)
	return fastOrSlow(b, req, pollRequest(&r, req) == nil && r.Done())
}

// decodePollResponse decodes a poll's answer, as decodeRecordRequest decodes a record.
func decodePollResponse(b []byte, resp *PollResponse) error {
	r := msgp.NewReader(b)
	return fastOrSlow(b, resp, pollResponse(&r, resp) == nil && r.Done())
}

func pollRequest(r *msgp.Reader, req *frontend.PollRequest) error {
	return r.Fields(func(key []byte) (err error) {
		var v int64
		switch string(key) {
		case "worker_id":
			req.WorkerID, err = r.Str()
		case "queues":
			req.Queues, err = r.Strs()
		case "max":
			v, err = r.Int()
			req.Max = int(v)
		case "wait":
			v, err = r.Int()
			req.Wait = time.Duration(v)
		default:
			// limits among them: rare, and msgpack's to read.
			return msgp.ErrSlowPath
		}
		return err
	})
}

func pollResponse(r *msgp.Reader, resp *PollResponse) error {
	return r.Fields(func(key []byte) (err error) {
		if string(key) != "tasks" {
			return msgp.ErrSlowPath
		}
		var m int
		if m, err = r.ArrayLen(); err != nil {
			return err
		}
		resp.Tasks = nil
		if m >= 0 {
			resp.Tasks = make([]frontend.Task, m)
		}
		for i := 0; i < m && err == nil; i++ {
			err = task(r, &resp.Tasks[i])
		}
		return err
	})
}

func task(r *msgp.Reader, t *frontend.Task) error {
	return r.Fields(func(key []byte) (err error) {
		var v int64
		switch string(key) {
		case "run_id":
			t.RunID, err = r.Str()
		case "job":
			t.Job, err = r.Str()
		case "queue":
			t.Queue, err = r.Str()
		case "fence":
			t.Fence, err = r.Int()
		case "attempt":
			v, err = r.Int()
			t.Attempt = int(v)
		case "input":
			t.Input, err = r.Bin()
		case "key":
			t.Key, err = r.Str()
		case "tenant":
			t.Tenant, err = r.Str()
		case "no_tenant":
			t.NoTenant, err = r.Bool()
		case "enqueued_by":
			t.EnqueuedBy, err = r.Str()
		case "last_seq":
			t.LastSeq, err = r.Int()
		case "lease_until":
			t.LeaseUntil, err = r.Time()
		case "lease":
			v, err = r.Int()
			t.Lease = time.Duration(v)
		case "lease_token":
			t.LeaseToken, err = r.Str()
		case "traceparent":
			t.TraceParent, err = r.Str()
		case "tracestate":
			t.TraceState, err = r.Str()
		case "tail":
			t.Tail, err = events(r)
		default:
			return msgp.ErrSlowPath
		}
		return err
	})
}

// appendEvents appends history events as msgpack's struct encoding writes them (nil as nil).
func appendEvents(b []byte, evs []history.Event) []byte {
	if evs == nil {
		return append(b, 0xc0)
	}
	b = msgp.AppendArrayLen(b, len(evs))
	for i := range evs {
		e := &evs[i]
		n := 4
		if e.Name != "" {
			n++
		}
		b = msgp.AppendMapLen(b, n)
		b = msgp.AppendInt(msgp.AppendStr(b, "seq"), e.Seq)
		b = msgp.AppendStr(msgp.AppendStr(b, "kind"), string(e.Kind))
		if e.Name != "" {
			b = msgp.AppendStr(msgp.AppendStr(b, "name"), e.Name)
		}
		b = msgp.AppendTime(msgp.AppendStr(b, "at"), e.At)
		b = msgp.AppendBin(msgp.AppendStr(b, "data"), e.Data)
	}
	return b
}

// events reads what appendEvents writes.
func events(r *msgp.Reader) ([]history.Event, error) {
	m, err := r.ArrayLen()
	if err != nil || m < 0 {
		return nil, err
	}
	out := make([]history.Event, m)
	for i := 0; i < m && err == nil; i++ {
		err = event(r, &out[i])
	}
	return out, err
}
