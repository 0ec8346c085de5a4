package history

import (
	"bytes"
	"strings"
	"testing"
)

// A run's history is contiguous from seq 1, its RunStarted. A dump that starts anywhere else
// (its head cut off, or its seqs edited to start at 0 or below) is not a run's history: Load
// refuses it on its first line, rather than handing replay events it would skip (replay folds
// only seqs past the last it folded, from 0) or a history without its RunStarted.
func TestLoadRefusesADumpThatDoesNotStartAtSeqOne(t *testing.T) {
	for name, first := range map[string]int64{"from zero": 0, "from below zero": -1} {
		ev := sample()
		for i := range ev {
			ev[i].Seq = first + int64(i)
		}
		var buf bytes.Buffer
		if err := Dump(&buf, ev); err != nil {
			t.Fatal(err)
		}
		if got, err := Load(&buf); err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "seq 1") {
			t.Errorf("%s: Load of a dump from seq %d: %d events, %v; want line 1 refused", name, first, len(got), err)
		}
	}
	var cut bytes.Buffer
	_ = Dump(&cut, sample()[2:]) // the head cut off: seq 3 on
	if got, err := Load(&cut); err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "seq 1") {
		t.Errorf("a dump from seq 3: %d events, %v; want line 1 refused", len(got), err)
	}
	// Blank lines before the first event are not events.
	var buf bytes.Buffer
	buf.WriteString("\n  \n")
	_ = Dump(&buf, sample())
	if got, err := Load(&buf); err != nil || len(got) != len(sample()) {
		t.Fatalf("a whole dump after blank lines: %d events, %v", len(got), err)
	}
}

// An event the engine stored is dumped on one line however large it is, and Load reads that line
// back: an engine whose MaxPayload is raised above its 1 MiB default stores outputs whose line
// (the payload in base64, and its view, where a control character takes six bytes) is past any
// fixed line limit. Load used to stop at 64 MiB ("bufio.Scanner: token too long"), so such a
// run's dump, or its retention archive (the only copy left once retention deletes the run),
// could not be loaded or replayed.
func TestLoadReadsBackALineOfAnySize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a dump line of about 70 MB")
	}
	ev := sample()
	ev[1] = New(t0, StepCompleted{StepName: "scan", Output: mp(strings.Repeat("\x01", 9<<20))})
	ev[1].Seq = 2
	var buf bytes.Buffer
	if err := Dump(&buf, ev); err != nil {
		t.Fatal(err)
	}
	if line, _, _ := strings.Cut(strings.SplitN(buf.String(), "\n", 3)[1], "\n"); len(line) <= 64<<20 {
		t.Fatalf("the step's line is %d bytes; the test needs one past 64 MiB", len(line))
	}
	got, err := Load(&buf)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(got) != len(ev) || !bytes.Equal(got[1].Data, ev[1].Data) || !got[1].At.Equal(ev[1].At) || got[1].Name != "scan" {
		t.Fatalf("loaded %d events; want %d, the step's exact", len(got), len(ev))
	}
}
