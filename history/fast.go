package history

import "github.com/ultimat3/jobs/internal/msgp"

// Every claimed run decodes its RunStarted twice (the engine's ledger, the worker's replay),
// every step encodes a StepCompleted and every run a RunCompleted. Through msgpack's reflection
// those were a visible share of a no-op job's CPU (field lookups, an interface per value, the
// omitempty walk), so the three kinds are written and read here by hand. The bytes are exactly
// what msgpack.Marshal writes for the same struct (a map of the fields in declaration order,
// omitempty fields left out when empty; fast_test.go compares them), so histories written
// either way read the same. Reading takes the fast path only for the encodings msgpack itself
// would produce for these fields; anything else (an unknown key, a value of another msgpack
// type) falls back to msgpack, which decides as before.

// Field names as msgpack writes them (a fixstr each); the tags on the structs are the source.
const (
	keyJob        = "\xa3job"
	keyQueue      = "\xa5queue"
	keyInput      = "\xa5input"
	keyKey        = "\xa3key"
	keyTenant     = "\xa6tenant"
	keyNoTenant   = "\xa9no_tenant"
	keyEnqueuedBy = "\xabenqueued_by"
	keyName       = "\xa4name"
	keyOutput     = "\xa6output"
	keyParallel   = "\xa8parallel"
	keyResult     = "\xa6result"
)

func encodeRunStarted(p RunStarted) []byte {
	fields := 4
	size := 1 + len(keyJob) + msgp.StrSize(p.Job) + len(keyQueue) + msgp.StrSize(p.Queue) +
		len(keyInput) + msgp.BinSize(p.Input) + len(keyKey) + msgp.StrSize(p.Key)
	if p.Tenant != "" {
		fields++
		size += len(keyTenant) + msgp.StrSize(p.Tenant)
	}
	if p.NoTenant {
		fields++
		size += len(keyNoTenant) + 1
	}
	if p.EnqueuedBy != "" {
		fields++
		size += len(keyEnqueuedBy) + msgp.StrSize(p.EnqueuedBy)
	}
	b := make([]byte, 0, size)
	b = append(b, 0x80|byte(fields))
	b = msgp.AppendStr(append(b, keyJob...), p.Job)
	b = msgp.AppendStr(append(b, keyQueue...), p.Queue)
	b = msgp.AppendBin(append(b, keyInput...), p.Input)
	b = msgp.AppendStr(append(b, keyKey...), p.Key)
	if p.Tenant != "" {
		b = msgp.AppendStr(append(b, keyTenant...), p.Tenant)
	}
	if p.NoTenant {
		b = append(append(b, keyNoTenant...), 0xc3)
	}
	if p.EnqueuedBy != "" {
		b = msgp.AppendStr(append(b, keyEnqueuedBy...), p.EnqueuedBy)
	}
	return b
}

func encodeStepCompleted(p StepCompleted) []byte {
	fields := 2
	size := 1 + len(keyName) + msgp.StrSize(p.StepName) + len(keyOutput) + msgp.BinSize(p.Output)
	if p.Parallel {
		fields++
		size += len(keyParallel) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, 0x80|byte(fields))
	b = msgp.AppendStr(append(b, keyName...), p.StepName)
	b = msgp.AppendBin(append(b, keyOutput...), p.Output)
	if p.Parallel {
		b = append(append(b, keyParallel...), 0xc3)
	}
	return b
}

func encodeRunCompleted(p RunCompleted) []byte {
	b := make([]byte, 0, 1+len(keyResult)+msgp.BinSize(p.Result))
	b = append(b, 0x80|1)
	return msgp.AppendBin(append(b, keyResult...), p.Result)
}

// The decoders take the forms msgpack writes for these fields; anything else (an unknown or a
// repeated key, another type) is msgp.ErrSlowPath and the caller falls back to msgpack.

func decodeRunStarted(data []byte) (p RunStarted, ok bool) {
	r := msgp.NewReader(data)
	err := r.Fields(func(key []byte) (err error) {
		switch string(key) {
		case "job":
			p.Job, err = r.Str()
		case "queue":
			p.Queue, err = r.Str()
		case "input":
			p.Input, err = r.Bin()
		case "key":
			p.Key, err = r.Str()
		case "tenant":
			p.Tenant, err = r.Str()
		case "no_tenant":
			p.NoTenant, err = r.Bool()
		case "enqueued_by":
			p.EnqueuedBy, err = r.Str()
		default:
			return msgp.ErrSlowPath
		}
		return err
	})
	return p, err == nil && r.Done()
}

func decodeStepCompleted(data []byte) (p StepCompleted, ok bool) {
	r := msgp.NewReader(data)
	err := r.Fields(func(key []byte) (err error) {
		switch string(key) {
		case "name":
			p.StepName, err = r.Str()
		case "output":
			p.Output, err = r.Bin()
		case "parallel":
			p.Parallel, err = r.Bool()
		default:
			return msgp.ErrSlowPath
		}
		return err
	})
	return p, err == nil && r.Done()
}

func decodeRunCompleted(data []byte) (p RunCompleted, ok bool) {
	r := msgp.NewReader(data)
	err := r.Fields(func(key []byte) (err error) {
		if string(key) != "result" {
			return msgp.ErrSlowPath
		}
		p.Result, err = r.Bin()
		return err
	})
	return p, err == nil && r.Done()
}
