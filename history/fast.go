package history

// Every claimed run decodes its RunStarted twice (the engine's ledger, the worker's replay),
// every step encodes a StepCompleted and every run a RunCompleted. Through msgpack's reflection
// those were a visible share of a no-op job's CPU (field lookups, an interface per value, the
// omitempty walk), so the three kinds are written and read here by hand. The bytes are exactly
// what msgpack.Marshal writes for the same struct (a map of the fields in declaration order,
// omitempty fields left out when empty; fast_test.go compares them), so histories written
// either way read the same. Reading takes the fast path only for the encodings msgpack itself
// would produce for these fields; anything else (an unknown key, a value of another msgpack
// type) falls back to msgpack, which decides as before.

const (
	mpNil      = 0xc0
	mpFalse    = 0xc2
	mpTrue     = 0xc3
	mpBin8     = 0xc4
	mpBin16    = 0xc5
	mpBin32    = 0xc6
	mpStr8     = 0xd9
	mpStr16    = 0xda
	mpStr32    = 0xdb
	mpMap16    = 0xde
	mpMap32    = 0xdf
	mpFixMap   = 0x80
	mpFixStr   = 0xa0
	mpFixStrHi = 0xbf
)

func strSize(s string) int {
	switch n := len(s); {
	case n < 32:
		return 1 + n
	case n < 256:
		return 2 + n
	case n <= 0xffff:
		return 3 + n
	default:
		return 5 + n
	}
}

func binSize(b []byte) int {
	switch n := len(b); {
	case b == nil:
		return 1
	case n < 256:
		return 2 + n
	case n <= 0xffff:
		return 3 + n
	default:
		return 5 + n
	}
}

func appendLen(b []byte, code8 byte, n int) []byte {
	switch {
	case n < 256:
		return append(b, code8, byte(n))
	case n <= 0xffff:
		return append(b, code8+1, byte(n>>8), byte(n))
	default:
		return append(b, code8+2, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendStr(b []byte, s string) []byte {
	if len(s) < 32 {
		b = append(b, mpFixStr|byte(len(s)))
	} else {
		b = appendLen(b, mpStr8, len(s))
	}
	return append(b, s...)
}

func appendBin(b []byte, v []byte) []byte {
	if v == nil {
		return append(b, mpNil)
	}
	return append(appendLen(b, mpBin8, len(v)), v...)
}

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
	size := 1 + len(keyJob) + strSize(p.Job) + len(keyQueue) + strSize(p.Queue) +
		len(keyInput) + binSize(p.Input) + len(keyKey) + strSize(p.Key)
	if p.Tenant != "" {
		fields++
		size += len(keyTenant) + strSize(p.Tenant)
	}
	if p.NoTenant {
		fields++
		size += len(keyNoTenant) + 1
	}
	if p.EnqueuedBy != "" {
		fields++
		size += len(keyEnqueuedBy) + strSize(p.EnqueuedBy)
	}
	b := make([]byte, 0, size)
	b = append(b, mpFixMap|byte(fields))
	b = appendStr(append(b, keyJob...), p.Job)
	b = appendStr(append(b, keyQueue...), p.Queue)
	b = appendBin(append(b, keyInput...), p.Input)
	b = appendStr(append(b, keyKey...), p.Key)
	if p.Tenant != "" {
		b = appendStr(append(b, keyTenant...), p.Tenant)
	}
	if p.NoTenant {
		b = append(append(b, keyNoTenant...), mpTrue)
	}
	if p.EnqueuedBy != "" {
		b = appendStr(append(b, keyEnqueuedBy...), p.EnqueuedBy)
	}
	return b
}

func encodeStepCompleted(p StepCompleted) []byte {
	fields := 2
	size := 1 + len(keyName) + strSize(p.StepName) + len(keyOutput) + binSize(p.Output)
	if p.Parallel {
		fields++
		size += len(keyParallel) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, mpFixMap|byte(fields))
	b = appendStr(append(b, keyName...), p.StepName)
	b = appendBin(append(b, keyOutput...), p.Output)
	if p.Parallel {
		b = append(append(b, keyParallel...), mpTrue)
	}
	return b
}

func encodeRunCompleted(p RunCompleted) []byte {
	b := make([]byte, 0, 1+len(keyResult)+binSize(p.Result))
	b = append(b, mpFixMap|1)
	return appendBin(append(b, keyResult...), p.Result)
}

// reader walks a payload; ok turns false at the first thing the fast path does not take.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) code() byte {
	if !r.ok || len(r.b) == 0 {
		r.ok = false
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uint(n int) int {
	if !r.ok || len(r.b) < n {
		r.ok = false
		return 0
	}
	v := 0
	for _, c := range r.b[:n] {
		v = v<<8 | int(c)
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) mapLen() int {
	switch c := r.code(); {
	case c&0xf0 == mpFixMap:
		return int(c & 0x0f)
	case c == mpMap16:
		return r.uint(2)
	case c == mpMap32:
		return r.uint(4)
	default:
		r.ok = false
		return 0
	}
}

// raw reads a str or bin value (msgpack reads either into a string or a []byte field) and
// reports whether it was nil.
func (r *reader) raw() (v []byte, isNil bool) {
	n := 0
	switch c := r.code(); {
	case c >= mpFixStr && c <= mpFixStrHi:
		n = int(c & 0x1f)
	case c == mpStr8 || c == mpBin8:
		n = r.uint(1)
	case c == mpStr16 || c == mpBin16:
		n = r.uint(2)
	case c == mpStr32 || c == mpBin32:
		n = r.uint(4)
	case c == mpNil:
		return nil, true
	default:
		r.ok = false
	}
	if !r.ok || len(r.b) < n {
		r.ok = false
		return nil, false
	}
	v, r.b = r.b[:n], r.b[n:]
	return v, false
}

func (r *reader) str() string {
	v, _ := r.raw()
	return string(v)
}

// bytes copies, as msgpack does: nil stays nil, an empty value is an empty non-nil slice.
func (r *reader) bytes() []byte {
	v, isNil := r.raw()
	if isNil || !r.ok {
		return nil
	}
	return append(make([]byte, 0, len(v)), v...)
}

func (r *reader) bool() bool {
	switch r.code() {
	case mpTrue:
		return true
	case mpFalse:
		return false
	default:
		r.ok = false
		return false
	}
}

// key reads a map key, a fixstr when msgpack writes these structs. The callers switch on
// string(key), which the compiler compares without converting.
func (r *reader) key() []byte {
	c := r.code()
	if c < mpFixStr || c > mpFixStrHi {
		r.ok = false
		return nil
	}
	n := int(c & 0x1f)
	if !r.ok || len(r.b) < n {
		r.ok = false
		return nil
	}
	k := r.b[:n]
	r.b = r.b[n:]
	return k
}

func decodeRunStarted(data []byte) (p RunStarted, ok bool) {
	r := reader{b: data, ok: true}
	for n := r.mapLen(); n > 0 && r.ok; n-- {
		switch string(r.key()) {
		case "job":
			p.Job = r.str()
		case "queue":
			p.Queue = r.str()
		case "input":
			p.Input = r.bytes()
		case "key":
			p.Key = r.str()
		case "tenant":
			p.Tenant = r.str()
		case "no_tenant":
			p.NoTenant = r.bool()
		case "enqueued_by":
			p.EnqueuedBy = r.str()
		default:
			r.ok = false
		}
	}
	return p, r.ok && len(r.b) == 0
}

func decodeStepCompleted(data []byte) (p StepCompleted, ok bool) {
	r := reader{b: data, ok: true}
	for n := r.mapLen(); n > 0 && r.ok; n-- {
		switch string(r.key()) {
		case "name":
			p.StepName = r.str()
		case "output":
			p.Output = r.bytes()
		case "parallel":
			p.Parallel = r.bool()
		default:
			r.ok = false
		}
	}
	return p, r.ok && len(r.b) == 0
}

func decodeRunCompleted(data []byte) (p RunCompleted, ok bool) {
	r := reader{b: data, ok: true}
	for n := r.mapLen(); n > 0 && r.ok; n-- {
		switch string(r.key()) {
		case "result":
			p.Result = r.bytes()
		default:
			r.ok = false
		}
	}
	return p, r.ok && len(r.b) == 0
}
