package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// manyEvents is a history of n events: a RunStarted, then steps (one of whose output the view
// cannot write, every 7th) and a "<tag>" in some names, which a JSON array must not escape.
func manyEvents(n int) []Event {
	out := make([]Event, n)
	for i := range out {
		switch {
		case i == 0:
			out[i] = New(t0, RunStarted{Job: "j", Queue: "q", Input: mp("in"), Key: "k"})
		case i%7 == 0:
			out[i] = New(t0, StepCompleted{StepName: fmt.Sprintf("when-%d", i), Output: mp(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))})
		default:
			out[i] = New(t0, StepCompleted{StepName: fmt.Sprintf("<s>&%d", i), Output: mp(strings.Repeat("x", i))})
		}
		out[i].Seq = int64(i + 1)
	}
	return out
}

// pagesOf serves events as pages of size events, recording the seq each read is after.
func pagesOf(events []Event, size int, reads *[]int64) PageFunc {
	return func(after int64) ([]Event, error) {
		*reads = append(*reads, after)
		var page []Event
		for _, e := range events {
			if e.Seq > after && len(page) < size {
				page = append(page, e)
			}
		}
		return page, nil
	}
}

// DumpPages writes, page by page, exactly what Dump writes of the whole history (the view
// dropped by the same rule), in both forms: JSON lines, and one JSON array of the same objects
// for no, one and many pages.
func TestDumpPagesIsDumpOfTheWholeHistory(t *testing.T) {
	for _, n := range []int{0, 1, 3, 50, 301} {
		events := manyEvents(n)
		var whole bytes.Buffer
		if err := Dump(&whole, events); err != nil {
			t.Fatal(err)
		}
		var lines []json.RawMessage
		for _, l := range bytes.Split(bytes.TrimSpace(whole.Bytes()), []byte{'\n'}) {
			if len(l) > 0 {
				lines = append(lines, l)
			}
		}
		for _, size := range []int{1, 7, 100} {
			var reads []int64
			var got bytes.Buffer
			if err := DumpPages(&got, pagesOf(events, size, &reads), DumpOptions{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), whole.Bytes()) {
				t.Fatalf("%d events in pages of %d: DumpPages wrote\n%s\nDump wrote\n%s", n, size, got.Bytes(), whole.Bytes())
			}
			if want := (n+size-1)/size + 1; len(reads) != want {
				t.Errorf("%d events in pages of %d: %d reads, want %d (the last one empty)", n, size, len(reads), want)
			}
			var arr bytes.Buffer
			reads = nil
			if err := DumpPages(&arr, pagesOf(events, size, &reads), DumpOptions{Array: true}); err != nil {
				t.Fatal(err)
			}
			var objs []json.RawMessage
			if err := json.Unmarshal(arr.Bytes(), &objs); err != nil || objs == nil || len(objs) != len(lines) {
				t.Fatalf("%d events in pages of %d: the array %q: %v, %d objects", n, size, arr.Bytes(), err, len(objs))
			}
			for i := range objs {
				if !bytes.Equal(objs[i], lines[i]) {
					t.Fatalf("object %d is %s; the line is %s", i, objs[i], lines[i])
				}
			}
			if !bytes.HasSuffix(arr.Bytes(), []byte("]\n")) {
				t.Errorf("the array does not end with a newline: %q", arr.Bytes())
			}
		}
	}
}

// A read that fails after the first page is returned as it is, after the pages before it were
// written; an array is left open, so it does not parse as a whole one.
func TestDumpPagesReturnsALaterPagesError(t *testing.T) {
	events := manyEvents(30)
	boom := errors.New("store down")
	var reads []int64
	pages := pagesOf(events, 10, &reads)
	failing := func(after int64) ([]Event, error) {
		if after >= 10 {
			return nil, boom
		}
		return pages(after)
	}
	for _, array := range []bool{false, true} {
		var got bytes.Buffer
		if err := DumpPages(&got, failing, DumpOptions{Array: array}); err != boom {
			t.Fatalf("array %v: DumpPages = %v; want the read's error", array, err)
		}
		if array {
			var v []json.RawMessage
			if json.Unmarshal(got.Bytes(), &v) == nil {
				t.Errorf("a dump cut short parses as a whole array: %s", got.Bytes())
			}
		} else if loaded, err := Load(&got); err != nil || len(loaded) != 10 {
			t.Errorf("the first page went out: loaded %d events (%v), want 10", len(loaded), err)
		}
	}
}

// A page that does not move past the seq it was read after is refused, not read forever.
func TestDumpPagesRefusesAPageThatDoesNotMoveOn(t *testing.T) {
	events := manyEvents(3)
	err := DumpPages(&bytes.Buffer{}, func(after int64) ([]Event, error) { return events, nil }, DumpOptions{})
	if err == nil || !strings.Contains(err.Error(), "ends at seq 3") {
		t.Fatalf("DumpPages of a page read again = %v", err)
	}
}
