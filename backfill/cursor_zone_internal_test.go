package backfill

import (
	"reflect"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
)

// A time in a cursor keeps its zone through the checkpoint: its name and offset are recorded
// beside the cursor (the codec keeps the instant only) and put back on the decoded value, so the
// time formats as the source returned it. A checkpoint recorded before zones were kept has none
// and reads its times in UTC, as they were read then.
func TestACheckpointKeepsItsCursorsZones(t *testing.T) {
	est := time.FixedZone("EST", -5*3600)
	at := time.Date(2024, 1, 1, 3, 0, 0, 5, est)
	utc := time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC)
	unnamed := time.Date(2024, 6, 1, 3, 0, 0, 0, time.FixedZone("", 5*3600+1800))
	live, err := normalCursor(Cursor{int64(1), at, utc, unnamed})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Time{at, utc, unnamed} {
		got := live[i+1].(time.Time)
		if !got.Equal(want) || got.String() != want.String() {
			t.Fatalf("live cursor value %d = %s; want %s", i+1, got, want)
		}
	}
	// Recorded as a page records it, then read back as the pass reads a step's result.
	cp := Checkpoint{Cursor: live, Zones: zonesOf(live), Rows: 2}
	if len(cp.Zones) != 2 || cp.Zones[0] != (CursorZone{Index: 1, Name: "EST", Offset: -5 * 3600}) {
		t.Fatalf("zones = %+v; want EST at 1 and +05:30 at 3 (UTC needs none)", cp.Zones)
	}
	b, err := jobs.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	var back Checkpoint
	if err := jobs.Decode(b, &back); err != nil {
		t.Fatal(err)
	}
	replayed := withZones(normalDecoded(back.Cursor), back.Zones)
	if !reflect.DeepEqual(replayed, live) {
		t.Fatalf("replayed cursor %v; want %v as the page returned it", replayed, live)
	}
	if !sameCursor(replayed, Cursor{int64(1), at.UTC(), utc, unnamed.UTC()}) {
		t.Fatalf("the same instants in another zone are the same position (the did-not-move check)")
	}
	// A checkpoint of an earlier build: no zones, times in UTC.
	old, err := jobs.Encode(struct {
		Cursor Cursor `json:"cursor"`
		Rows   int64  `json:"rows"`
	}{Cursor{int64(1), at}, 2})
	if err != nil {
		t.Fatal(err)
	}
	back = Checkpoint{}
	if err := jobs.Decode(old, &back); err != nil {
		t.Fatal(err)
	}
	if got := withZones(normalDecoded(back.Cursor), back.Zones)[1].(time.Time); got.Location() != time.UTC || !got.Equal(at) {
		t.Fatalf("an old checkpoint's time = %s; want it in UTC", got)
	}
	// A pointer to a time reads back as a time, in its zone.
	if got, err := normalCursor(Cursor{&at}); err != nil || got[0].(time.Time).String() != at.String() {
		t.Fatalf("a *time.Time cursor = %v, %v; want %s", got, err, at)
	}
	// A zone that names no time (a damaged record) changes nothing.
	if got := withZones(Cursor{int64(1)}, []CursorZone{{Index: 0, Offset: 60}, {Index: 7, Offset: 60}}); got[0] != int64(1) {
		t.Fatalf("withZones on a non-time = %v", got)
	}
}
