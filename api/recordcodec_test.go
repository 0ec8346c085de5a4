package api

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
)

// The record codec (recordcodec.go) must be msgpack's, exactly: what it writes msgpack reads as
// what msgpack's own encoding would read as, and what it reads from any bytes (msgpack's
// encoding, its own, or those bytes broken) is what msgpack's decoder makes of them, refusal
// included.

func randText(r *rand.Rand) string {
	switch r.IntN(6) {
	case 0:
		return ""
	case 1:
		return strings.Repeat("é", 20+r.IntN(300)) // str8 and str16
	case 2:
		return strings.Repeat("x", 70000) // str32
	}
	return fmt.Sprintf("t%d", r.IntN(1000))
}

func randBytes(r *rand.Rand) []byte {
	switch r.IntN(5) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		return make([]byte, 300+r.IntN(70000))
	}
	return []byte(fmt.Sprint(r.Int64()))
}

func randTime(r *rand.Rand) time.Time {
	switch r.IntN(5) {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(r.Int64N(1<<32), 0) // 4 bytes
	case 2:
		return time.Unix(r.Int64N(1<<34), r.Int64N(1e9)) // 8 bytes
	case 3:
		return time.Unix(-r.Int64N(1<<40), r.Int64N(1e9)) // 12 bytes
	}
	return time.Now()
}

func randInt(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return 0
	case 1:
		return -r.Int64N(40)
	case 2:
		return r.Int64N(1 << 8)
	case 3:
		return -r.Int64N(1 << 16)
	case 4:
		return r.Int64N(1 << 33)
	}
	return r.Int64() - r.Int64()
}

func randRecord(r *rand.Rand) frontend.RecordRequest {
	req := frontend.RecordRequest{RunID: randText(r), Fence: randInt(r), WorkerID: randText(r), LeaseToken: randText(r),
		AfterSeq: randInt(r), Retry: r.IntN(2) == 0, Slot: randText(r)}
	if n := r.IntN(5) - 1; n >= 0 {
		req.Commands = make([]frontend.Command, n)
		if r.IntN(10) == 0 {
			req.Commands = make([]frontend.Command, 20) // array16
		}
	}
	for i := range req.Commands {
		c := frontend.Command{Kind: frontend.CommandKind(randText(r)), Name: randText(r), Output: randBytes(r),
			WakeAt: randTime(r), Event: randText(r), TimeoutAt: randTime(r), Lookback: randText(r), Sticky: r.IntN(2) == 0,
			RetryAfter: time.Duration(randInt(r)), Attempt: int(randInt(r)), Code: randText(r), Error: randText(r), Step: randText(r), Stop: randText(r),
			RetryAt: randTime(r), ReadyAt: randTime(r), Version: int(randInt(r)), Parallel: r.IntN(2) == 0, Matched: r.IntN(2) == 0}
		if r.IntN(3) == 0 {
			c.Match = []string{randText(r), randText(r)}
		}
		if r.IntN(3) == 0 {
			c.Codes = []string{randText(r)}
		}
		if r.IntN(3) == 0 {
			c.Effect = &frontend.Effect{Job: randText(r), Input: randBytes(r), Delay: time.Duration(randInt(r)), Child: true}
		}
		req.Commands[i] = c
	}
	return req
}

func randResponse(r *rand.Rand) frontend.RecordResponse {
	resp := frontend.RecordResponse{LastSeq: randInt(r), State: randText(r)}
	if n := r.IntN(5) - 1; n >= 0 {
		resp.Appended = make([]history.Event, n)
	}
	for i := range resp.Appended {
		resp.Appended[i] = history.Event{Seq: randInt(r), Kind: history.Kind(randText(r)), Name: randText(r), At: randTime(r), Data: randBytes(r)}
	}
	return resp
}

// viaMsgpack is v through msgpack's own encoder and decoder.
func viaMsgpack[T any](t *testing.T, v T) T {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := msgpack.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// agreesWithMsgpack checks one value through both encoders (ours, by appendMsgpack, and
// msgpack's) and both decoders (decode and msgpack's): every way, what msgpack's own round trip
// makes of it.
func agreesWithMsgpack[T any](t *testing.T, i int, v T, decode func([]byte, *T) error) {
	t.Helper()
	want := viaMsgpack(t, v)
	ours, err := appendMsgpack(nil, &v)
	if err != nil {
		t.Fatal(err)
	}
	std, _ := msgpack.Marshal(v)
	for _, b := range [][]byte{ours, std} {
		var got, slow T
		if err := decode(b, &got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if err := msgpack.Unmarshal(b, &slow); err != nil {
			t.Fatalf("case %d: msgpack reads our encoding: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(slow, want) {
			t.Fatalf("case %d: the codec read\n%+v\nmsgpack read\n%+v\nwant\n%+v", i, got, slow, want)
		}
	}
}

func TestRecordCodecIsMsgpacks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400; i++ {
		agreesWithMsgpack(t, i, randRecord(r), decodeRecordRequest)
		agreesWithMsgpack(t, i, randResponse(r), decodeRecordResponse)
	}
}

// readsAsMsgpack checks that decode reads b as msgpack's decoder does: the same refusal or the
// same value. Where msgpack's decoder panics the codec must not (it refuses, or reads the nil
// time msgpack panics on as the zero time).
func readsAsMsgpack[T any](t *testing.T, what string, b []byte, decode func([]byte, *T) error) {
	t.Helper()
	var got, want T
	err := decode(b, &got)
	werr, panicked := unmarshalNoPanic(b, &want)
	if !panicked && ((err == nil) != (werr == nil) || (err == nil && !reflect.DeepEqual(got, want))) {
		t.Fatalf("%s %x: the codec read %+v (%v), msgpack %+v (%v)", what, b, got, err, want, werr)
	}
}

// bothReadAsMsgpack checks a request and its answer read from b as msgpack reads them.
func bothReadAsMsgpack[Q, S any](t *testing.T, b []byte, decQ func([]byte, *Q) error, decS func([]byte, *S) error) {
	t.Helper()
	if checkMsgpack(b) != nil {
		// Refused before any decoder sees it (and msgpack's would allocate what it claims).
		return
	}
	readsAsMsgpack(t, "request", b, decQ)
	readsAsMsgpack(t, "answer", b, decS)
}

// sameAsMsgpack checks the record and its answer read from b as msgpack reads them.
func sameAsMsgpack(t *testing.T, b []byte) {
	t.Helper()
	bothReadAsMsgpack(t, b, decodeRecordRequest, decodeRecordResponse)
}

func unmarshalNoPanic(b []byte, v any) (err error, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return msgpack.Unmarshal(b, v), false
}

// Broken, reordered, duplicated, truncated and foreign shapes that pass the shape check every
// body passes first: read as msgpack reads them.
func TestRecordCodecReadsAnyBytesAsMsgpack(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	shapes := [][]byte{
		nil, {0xc0}, {0x80}, {0x90}, {0x81, 0xa6, 'r', 'u', 'n', '_', 'i', 'd', 0x01},
		// The same key twice; a nil where a time belongs; an array for the struct; a huge array.
		msgpackOf(map[string]any{"commands": []any{map[string]any{"kind": "step", "name": "a"}}}),
		{0x82, 0xa8, 'c', 'o', 'm', 'm', 'a', 'n', 'd', 's', 0x91, 0x81, 0xa4, 'k', 'i', 'n', 'd', 0xa1, 'a',
			0xa8, 'c', 'o', 'm', 'm', 'a', 'n', 'd', 's', 0x90},
		msgpackOf(map[string]any{"commands": []any{map[string]any{"wake_at": nil, "sticky": nil, "attempt": 1.5}}}),
		msgpackOf(map[string]any{"appended": []any{map[string]any{"at": "2026-12-01T00:00:00Z", "data": "str"}}}),
		msgpackOf([]any{"r", 1, "w"}),
		{0x81, 0xa8, 'c', 'o', 'm', 'm', 'a', 'n', 'd', 's', 0xdd, 0xff, 0xff, 0xff, 0xff},
		{0x81, 0xa8, 'a', 'p', 'p', 'e', 'n', 'd', 'e', 'd', 0xdd, 0x7f, 0xff, 0xff, 0xff, 0x80},
	}
	for i := 0; i < 50; i++ {
		b, _ := appendMsgpack(nil, randRecord(r))
		shapes = append(shapes, b)
		b, _ = appendMsgpack(nil, randResponse(r))
		shapes = append(shapes, b)
	}
	mutated(r, shapes, func(b []byte) { sameAsMsgpack(t, b) })
}

// mutated calls check with each shape and with 40 mutations of it: a byte changed, the bytes cut
// short, a byte added.
func mutated(r *rand.Rand, shapes [][]byte, check func([]byte)) {
	for _, b := range shapes {
		check(b)
		for j := 0; j < 40 && len(b) > 0; j++ {
			m := append([]byte(nil), b...)
			switch r.IntN(3) {
			case 0:
				m[r.IntN(len(m))] = byte(r.IntN(256))
			case 1:
				m = m[:r.IntN(len(m))]
			case 2:
				m = append(m, byte(r.IntN(256)))
			}
			check(m)
		}
	}
}

func msgpackOf(v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzRecordCodec(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 8; i++ {
		b, _ := appendMsgpack(nil, randRecord(r))
		f.Add(b)
		b, _ = appendMsgpack(nil, randResponse(r))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameAsMsgpack(t, b) })
}

// exampleRecord is a ten-step run's step record and its answer.
func exampleRecord() (frontend.RecordRequest, frontend.RecordResponse) {
	return frontend.RecordRequest{RunID: "0194f0c6-8f3a-7c1e-9b2d-3f4a5b6c7d8e", Fence: 3, WorkerID: "worker-1234",
			LeaseToken: strings.Repeat("t", 43), AfterSeq: 5, Slot: "job:tenstep",
			Commands: []frontend.Command{{Kind: frontend.CmdStep, Name: "s4", Output: []byte{0x04}}}},
		frontend.RecordResponse{Appended: []history.Event{{Seq: 6, Kind: history.KindStepCompleted, Name: "s4",
			At: time.Now(), Data: []byte{0x81, 0xa1, 'o', 0x04}}}, LastSeq: 6, State: "running"}
}

func BenchmarkRecordCodec(b *testing.B) {
	req, resp := exampleRecord()
	benchmarkCodec(b, "record-codec", req, resp, decodeRecordRequest, decodeRecordResponse)
}

// benchmarkCodec times a request and its answer, each encoded and decoded, through msgpack's
// reflection and through the API's codec (appendMsgpack and the decoders given).
func benchmarkCodec[Q, S any](b *testing.B, name string, req Q, resp S, decQ func([]byte, *Q) error,
	decS func([]byte, *S) error) {
	b.Run("msgpack", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			qb, _ := msgpack.Marshal(req)
			sb, _ := msgpack.Marshal(resp)
			var q Q
			var s S
			_ = msgpack.Unmarshal(qb, &q)
			_ = msgpack.Unmarshal(sb, &s)
		}
	})
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			qb, _ := appendMsgpack(nil, req)
			sb, _ := appendMsgpack(nil, resp)
			var q Q
			var s S
			_ = decQ(qb, &q)
			_ = decS(sb, &s)
		}
	})
}

// The codecs are the ones the API uses: appendMsgpack writes what each type's own encoder
// writes, given the value or a pointer to it, and the engine's and the client's decoding of a
// record, a poll and their answers allocate less than msgpack's decoder does for the same bytes.
func TestTheAPIsMsgpackGoesThroughTheCodecs(t *testing.T) {
	rec, recAns := exampleRecord()
	poll, tasks := examplePoll()
	recB, _ := appendRecordRequest(nil, &rec)
	pollB, _ := appendPollRequest(nil, &poll)
	for _, c := range []struct {
		what string
		v    [2]any
		want []byte
	}{
		{"a record", [2]any{rec, &rec}, recB},
		{"a record's answer", [2]any{recAns, &recAns}, appendRecordResponse(nil, &recAns)},
		{"a poll", [2]any{poll, &poll}, pollB},
		{"a poll's answer", [2]any{tasks, &tasks}, appendPollResponse(nil, &tasks)},
	} {
		for _, v := range c.v {
			if got, err := appendMsgpack(nil, v); err != nil || !bytes.Equal(got, c.want) {
				t.Errorf("appendMsgpack(%T) of %s: not its own encoder's bytes (%v)", v, c.what, err)
			}
		}
	}
	// Each against what the same call does without its codec: the engine checks a body's shape,
	// then decodes it; the client decodes an answer.
	fewer := func(what string, ours, without func()) {
		t.Helper()
		if o, w := testing.AllocsPerRun(20, ours), testing.AllocsPerRun(20, without); o >= w {
			t.Errorf("%s: %.0f allocations, %.0f through msgpack's decoder: not decoded by its codec", what, o, w)
		}
	}
	recAnsB := appendRecordResponse(nil, &recAns)
	tasksB := appendPollResponse(nil, &tasks)
	engine := func(b []byte, fresh func() any) func() {
		return func() { _ = checkMsgpack(b); _ = slowDecode(b, fresh()) }
	}
	fewer("the engine's record", func() { _ = decodeMsgpack(recB, &frontend.RecordRequest{}) },
		engine(recB, func() any { return &frontend.RecordRequest{} }))
	fewer("the engine's poll", func() { _ = decodeMsgpack(pollB, &frontend.PollRequest{}) },
		engine(pollB, func() any { return &frontend.PollRequest{} }))
	fewer("the client's record answer", func() {
		_ = decodeAs(response{contentType: ContentMsgpack, body: recAnsB}, &frontend.RecordResponse{})
	}, func() { _ = slowDecode(recAnsB, &frontend.RecordResponse{}) })
	fewer("the client's poll answer", func() {
		_ = decodeAs(response{contentType: ContentMsgpack, body: tasksB}, &PollResponse{})
	}, func() { _ = slowDecode(tasksB, &PollResponse{}) })
}
