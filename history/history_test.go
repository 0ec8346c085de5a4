package history

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

func sample() []Event {
	out := []Event{
		New(t0, RunStarted{Job: "onboard", Queue: "default", Input: mp(map[string]any{"orgId": "acme"}), Key: "k", Tenant: "acme"}),
		New(t0, StepCompleted{StepName: "provision", Output: mp("db-acme")}),
		New(t0, TimerStarted{TimerName: "nap", WakeAt: t0.Add(72 * time.Hour)}),
		New(t0.Add(72*time.Hour), TimerFired{TimerName: "nap"}),
		New(t0, EventWaitStarted{WaitName: "plan", Event: "plan.chosen", Match: []string{`orgId="acme"`}, TimeoutAt: t0.Add(time.Hour)}),
		New(t0, EventReceived{WaitName: "plan", EventID: "e1", Payload: mp(map[string]any{"plan": "pro"})}),
		New(t0, AttemptFailed{Attempt: 1, Code: "X_TIMEOUT", Error: "late", Stop: StopTerminal}),
		New(t0, RunCompleted{Result: mp(1)}),
	}
	for i := range out {
		out[i].Seq = int64(i + 1)
	}
	return out
}

func mp(v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestDumpLoadRoundTripIsExact(t *testing.T) {
	events := sample()
	var buf bytes.Buffer
	if err := Dump(&buf, events); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"view":{"name":"provision","output":"db-acme"}`) {
		t.Fatalf("the dump must show payloads decoded for people:\n%s", buf.String())
	}
	got, err := Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events) {
		t.Fatalf("%d events, want %d", len(got), len(events))
	}
	for i := range events {
		a, b := events[i], got[i]
		if a.Seq != b.Seq || a.Kind != b.Kind || a.Name != b.Name || !a.At.Equal(b.At) || !bytes.Equal(a.Data, b.Data) {
			t.Fatalf("event %d: %+v != %+v", i, a, b)
		}
		if _, err := b.Decode(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadRefusesGapsAndUnknownKinds(t *testing.T) {
	var buf bytes.Buffer
	ev := sample()
	_ = Dump(&buf, []Event{ev[0], ev[2]})
	if _, err := Load(&buf); err == nil || !strings.Contains(err.Error(), "contiguous") {
		t.Fatalf("a gap: %v", err)
	}
	if _, err := Load(strings.NewReader(`{"seq":1,"kind":"Nope","data":""}`)); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

func TestMatchKeysAgreeAcrossEncodings(t *testing.T) {
	want, _ := MatchKeys(map[string]any{"orgId": "acme", "n": 1})
	for _, payload := range []any{
		map[string]any{"orgId": "acme", "n": int64(1), "extra": true},
		map[string]any{"orgId": "acme", "n": 1.0},
		struct {
			OrgID string `msgpack:"orgId"`
			N     uint8  `msgpack:"n"`
		}{"acme", 1},
	} {
		have, err := FieldKeys(mp(payload))
		if err != nil {
			t.Fatal(err)
		}
		if !Matches(want, have) {
			t.Fatalf("%v does not match %v", have, want)
		}
	}
	var num map[string]any
	d := json.NewDecoder(strings.NewReader(`{"orgId":"acme","n":1}`))
	d.UseNumber()
	_ = d.Decode(&num)
	if k, _ := MatchKeys(num); strings.Join(k, ",") != strings.Join(want, ",") {
		t.Fatalf("json.Number: %v vs %v", k, want)
	}
	other, _ := FieldKeys(mp(map[string]any{"orgId": "globex", "n": 1}))
	if Matches(want, other) {
		t.Fatal("a different orgId matched")
	}
	if !Matches(nil, other) {
		t.Fatal("an empty match takes any event")
	}
}

func FuzzLoad(f *testing.F) {
	var buf bytes.Buffer
	_ = Dump(&buf, sample())
	f.Add(buf.String())
	f.Add(`{"seq":1,"kind":"RunStarted","data":"!!"}`)
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		events, err := Load(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, e := range events {
			_, _ = e.Decode() // must not panic on any payload
		}
		var out bytes.Buffer
		if err := Dump(&out, events); err != nil {
			t.Fatal(err)
		}
	})
}

// A dump line whose data claims more bytes than it holds is refused by Load, before anything is
// made for it: an 84-byte line whose input claimed 4 GiB made a test that loaded it allocate that
// much (or die out of memory on a small runner) when the event was decoded. So is a well-formed
// event carrying such a value as its input.
func TestLoadRefusesLengthsPastTheirBytes(t *testing.T) {
	bin32 := []byte{0xc6, 0xff, 0xff, 0xff, 0xff} // bin 32 of 4 GiB, with no bytes after it
	inner, err := msgpack.Marshal(map[string]any{"input": bin32})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"the event's own data":  append([]byte("\x81\xa5input"), bin32...),
		"the input it carries":  inner,
		"bytes after the value": append(inner, 0xc0),
	} {
		line := fmt.Sprintf(`{"seq":1,"kind":"RunStarted","at":"2026-01-05T09:00:00Z","data":%q}`+"\n", base64.StdEncoding.EncodeToString(data))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Load(strings.NewReader(line))
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Fatalf("%s: Load: %v; want the line refused", name, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Fatalf("%s: Load allocated %d bytes to refuse an 84-byte line", name, grew)
		}
	}
}

// A payload the view cannot write (a time JSON has no form for, stored before the engine refused
// such values) is dumped without its view, and loads back exact: a history is never impossible
// to dump, nor a run impossible to archive before retention deletes it.
func TestDumpOfAPayloadTheViewCannotWrite(t *testing.T) {
	events := sample()
	events[1] = New(t0, StepCompleted{StepName: "when", Output: mp(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))})
	events[1].Seq = 2
	var buf bytes.Buffer
	if err := Dump(&buf, events); err != nil {
		t.Fatalf("Dump: %v", err)
	}
	got, err := Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events) || !bytes.Equal(got[1].Data, events[1].Data) {
		t.Fatalf("loaded %d events, the second's data %x; want %d, %x", len(got), got[1].Data, len(events), events[1].Data)
	}
}
