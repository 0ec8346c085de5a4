package history

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs/internal/race"
)

// The hand-written codec of the three hot kinds must write exactly msgpack's bytes and read
// back exactly what msgpack reads, at every length boundary of msgpack's str and bin headers.
func TestFastCodecMatchesMsgpack(t *testing.T) {
	strs := []string{"", "a", strings.Repeat("s", 31), strings.Repeat("s", 32), strings.Repeat("s", 255),
		strings.Repeat("s", 256), strings.Repeat("s", 65535), strings.Repeat("s", 65536)}
	bins := [][]byte{nil, {}, {7}, bytes.Repeat([]byte{1}, 255), bytes.Repeat([]byte{2}, 256),
		bytes.Repeat([]byte{3}, 65535), bytes.Repeat([]byte{4}, 65536)}
	var payloads []Payload
	for i, s := range strs {
		for j, b := range bins {
			other := strs[(i+j)%len(strs)]
			payloads = append(payloads,
				RunStarted{Job: s, Queue: other, Input: b, Key: s},
				RunStarted{Job: "j", Queue: "default", Input: b, Key: other, Tenant: s, NoTenant: j%2 == 0, EnqueuedBy: other},
				StepCompleted{StepName: s, Output: b},
				StepCompleted{StepName: other, Output: b, Parallel: true},
				RunCompleted{Result: b})
		}
	}
	for _, p := range payloads {
		want, err := msgpack.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		ev := New(time.Time{}, p)
		if !bytes.Equal(ev.Data, want) {
			t.Fatalf("%s %.60v: wrote % x…, msgpack writes % x…", p.Kind(), p, head(ev.Data), head(want))
		}
		got, err := ev.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("%s: read back %.60v, want %.60v", p.Kind(), got, p)
		}
		if sc, ok := p.(StepCompleted); ok {
			if got, err := ev.StepCompleted(); err != nil || !reflect.DeepEqual(got, sc) {
				t.Fatalf("StepCompleted() = %.60v, %v", got, err)
			}
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 24)] }

// Encodings msgpack reads but the fast path does not take (str for bin and bin for str, a
// nil, an unknown key, a struct as an array) are read by msgpack, as before.
func TestFastCodecFallsBack(t *testing.T) {
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		kind Kind
		data []byte
		want Payload
	}{
		{KindRunStarted, enc(map[string]any{"job": []byte("j"), "input": "in", "no_tenant": nil, "extra": 1}),
			RunStarted{Job: "j", Input: []byte("in")}},
		{KindStepCompleted, enc([]any{"s", []byte{1}, true}), StepCompleted{StepName: "s", Output: []byte{1}, Parallel: true}},
		{KindRunCompleted, enc(map[string]any{"result": nil}), RunCompleted{}},
		{KindRunCompleted, enc(nil), RunCompleted{}},
	}
	for _, c := range cases {
		got, err := Event{Kind: c.kind, Data: c.data}.Decode()
		if err != nil {
			t.Fatalf("%s % x: %v", c.kind, c.data, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%s % x: read %#v, want %#v", c.kind, c.data, got, c.want)
		}
	}
	if _, err := (Event{Kind: KindRunStarted, Data: []byte{0x81, 0xa3, 'j', 'o'}}).Decode(); err == nil {
		t.Fatal("a truncated payload decoded")
	}
}

// Per claimed run the engine and the worker each decode its RunStarted, and every step and
// run encodes its event. The budgets count what the fast path cannot avoid: the strings and
// bytes read, the payload boxed in its interface, the event's data.
func TestFastCodecAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	started := New(time.Time{}, RunStarted{Job: "noop", Queue: "default", Input: []byte{1}, Key: "k-1", NoTenant: true})
	step := StepCompleted{StepName: "s1", Output: []byte{2}}
	for _, c := range []struct {
		name   string
		budget float64
		f      func()
	}{
		{"decode RunStarted", 5, func() { _, _ = started.Decode() }},
		{"encode StepCompleted", 2, func() { _ = New(time.Time{}, step) }},
		{"encode RunCompleted", 3, func() { _ = New(time.Time{}, RunCompleted{Result: []byte{3}}) }},
	} {
		if n := testing.AllocsPerRun(200, c.f); n > c.budget {
			t.Errorf("%s: %.0f allocations, budget %.0f", c.name, n, c.budget)
		}
	}
}

// go test -bench FastCodec ./history/: the hand-written path beside msgpack's, for the three kinds.
func BenchmarkFastCodec(b *testing.B) {
	started := RunStarted{Job: "noop", Queue: "default", Input: []byte{1}, Key: "k-1", NoTenant: true}
	data := encodeRunStarted(started)
	step := StepCompleted{StepName: "s1", Output: []byte{2}}
	b.Run("decode RunStarted", func(b *testing.B) {
		for range b.N {
			_, _ = decodeRunStarted(data)
		}
	})
	b.Run("decode RunStarted msgpack", func(b *testing.B) {
		for range b.N {
			_, _ = decodeAs[RunStarted](data)
		}
	})
	b.Run("encode StepCompleted", func(b *testing.B) {
		for range b.N {
			_ = encodeStepCompleted(step)
		}
	})
	b.Run("encode StepCompleted msgpack", func(b *testing.B) {
		for range b.N {
			_, _ = marshal(step)
		}
	})
}
