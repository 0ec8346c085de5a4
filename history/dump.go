package history

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/internal/msgp"
	"github.com/ultimat3/jobs/internal/termtext"
)

// The dump format is JSON lines, one event a line:
//
//	{"seq":2,"kind":"StepCompleted","name":"provision","at":"…","data":"<base64 msgpack>","view":{…}}
//
// "data" is the exact stored payload, so Load reads back byte-identical events and replay sees
// what the worker saw. "view" is the same payload decoded for people; Load ignores it.

type dumpLine struct {
	Seq  int64     `json:"seq"`
	Kind Kind      `json:"kind"`
	Name string    `json:"name,omitempty"`
	At   time.Time `json:"at"`
	Data string    `json:"data"`
	View any       `json:"view,omitempty"`
}

// Dump writes events as JSON lines.
func Dump(w io.Writer, events []Event) error { return DumpWith(w, events, nil) }

// Opener returns the plain payload of a payload a codec encoded (codec.Set.Open); nil shows
// such payloads as what they are ("encrypted by codec aesgcm/k1, 48 bytes").
type Opener func([]byte) ([]byte, error)

// DumpWith is Dump with payloads opened by open in the "view" (never in "data", which stays the
// exact stored bytes). It is DumpPages of one page.
func DumpWith(w io.Writer, events []Event, open Opener) error {
	d := newDumper(w, DumpOptions{Open: open})
	if err := d.events(events); err != nil {
		return err
	}
	return d.flush()
}

// PageFunc reads a history a page at a time: the events after seq after, in order. An empty
// page with a nil error is the history's end.
type PageFunc func(after int64) ([]Event, error)

// DumpOptions shapes a dump DumpPages writes.
type DumpOptions struct {
	// Open opens codec-encoded payloads in the views (DumpWith's open).
	Open Opener
	// Array writes one JSON array of the lines' objects ("[", the objects with commas, "]\n";
	// "[]\n" for no events) instead of JSON lines.
	Array bool
}

// EncodeError is an event a dump could not write even without its view.
type EncodeError struct {
	Seq int64
	Err error
}

func (e *EncodeError) Error() string { return fmt.Sprintf("history: event %d: %v", e.Seq, e.Err) }
func (e *EncodeError) Unwrap() error { return e.Err }

// DumpPages writes the history next reads as a dump while it reads it: each page is written
// before the next is read, so what the dump holds at once is one page and at most dumpFlushAt
// bytes of lines, not the history (a run of thousands of 1 MiB steps is gigabytes). Each line is
// DumpWith's, by the same rule (its view dropped when it cannot be written).
//
// next's error and w's are returned as they are; an event that cannot be written is an
// *EncodeError. After an error, w holds a dump cut short, which may end on a whole line (and a
// JSON array is left open): the caller must not hand it on as a whole dump.
func DumpPages(w io.Writer, next PageFunc, o DumpOptions) error {
	d := newDumper(w, o)
	var after int64
	for {
		page, err := next(after)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		if last := page[len(page)-1].Seq; last <= after {
			// A page that does not move on would be read again forever.
			return fmt.Errorf("history: the page after seq %d ends at seq %d", after, last)
		}
		if err := d.events(page); err != nil {
			return err
		}
		if err := d.flush(); err != nil {
			return err
		}
		after = page[len(page)-1].Seq
	}
	return d.close()
}

// dumpFlushAt is how many bytes of lines a dump gathers before it writes them.
const dumpFlushAt = 64 << 10

// dumper writes dump lines to w, gathered in buf.
type dumper struct {
	w   io.Writer
	o   DumpOptions
	buf bytes.Buffer
	enc *json.Encoder // onto buf
	n   int           // events written
}

func newDumper(w io.Writer, o DumpOptions) *dumper {
	d := &dumper{w: w, o: o}
	d.enc = json.NewEncoder(&d.buf)
	d.enc.SetEscapeHTML(false)
	return d
}

// events adds events' lines, writing them out each time dumpFlushAt bytes are gathered.
func (d *dumper) events(events []Event) error {
	for _, e := range events {
		if err := d.line(e); err != nil {
			return err
		}
		if d.buf.Len() >= dumpFlushAt {
			if err := d.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// line adds one event's line (an array's element: its object, after "[" or ",").
func (d *dumper) line(e Event) error {
	if d.o.Array {
		if d.n == 0 {
			d.buf.WriteByte('[')
		} else {
			d.buf.WriteByte(',')
		}
	}
	mark := d.buf.Len()
	line := dumpLine{Seq: e.Seq, Kind: e.Kind, Name: e.Name, At: e.At, Data: base64.StdEncoding.EncodeToString(e.Data)}
	line.View = ViewWith(e, d.o.Open)
	if err := d.enc.Encode(line); err != nil {
		d.buf.Truncate(mark)
		if line.View == nil {
			return &EncodeError{Seq: e.Seq, Err: err}
		}
		// The view is for people; "data" alone loads back. A payload the view cannot write
		// (a time JSON has no form for, stored before the engine refused such values) must
		// not make the history impossible to dump, or to archive before retention deletes it.
		line.View = nil
		if err := d.enc.Encode(line); err != nil {
			d.buf.Truncate(mark)
			return &EncodeError{Seq: e.Seq, Err: err}
		}
	}
	if d.o.Array {
		d.buf.Truncate(d.buf.Len() - 1) // the Encoder's newline
	}
	d.n++
	return nil
}

// flush writes the gathered lines to w.
func (d *dumper) flush() error {
	if d.buf.Len() == 0 {
		return nil
	}
	_, err := d.w.Write(d.buf.Bytes())
	d.buf.Reset()
	return err
}

// close ends the dump: an array's "]" (its "[" too when it has no element).
func (d *dumper) close() error {
	if d.o.Array {
		if d.n == 0 {
			d.buf.WriteByte('[')
		}
		d.buf.WriteString("]\n")
	}
	return d.flush()
}

// LoadFile is Load of a dump file (`engine history dump ID > file`).
func LoadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Load(f)
}

// Load reads events written by Dump. A run's history is contiguous from seq 1 (its RunStarted),
// so Load refuses a dump whose first event is not seq 1 (its head cut off, or its seqs edited)
// and one whose seqs are not contiguous. An empty dump is no events.
func Load(r io.Reader) ([]Event, error) {
	// Lines are read whole, whatever their length: the engine writes an event on one line however
	// large it is (an engine's MaxPayload may be raised far past its 1 MiB default, and a payload's
	// view may take six bytes a byte), and a line limit made such a dump, or the retention archive
	// that is a deleted run's only copy, impossible to load (TestLoadReadsBackALineOfAnySize).
	// What Load holds is bounded by what it reads, as it is for a dump of many lines.
	br := bufio.NewReaderSize(r, 64*1024)
	var out []Event
	n := 0
	for {
		raw, rerr := br.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, fmt.Errorf("history: line %d: %w", n+1, rerr)
		}
		if len(raw) == 0 && rerr == io.EOF {
			break
		}
		n++
		text := bytes.TrimSpace(raw)
		if len(text) == 0 {
			if rerr == io.EOF {
				break
			}
			continue
		}
		// The view is for people and Load ignores it: it is skipped, not decoded (loadLine has
		// no field for it), which for a large payload is most of the line.
		var l loadLine
		if err := json.Unmarshal(text, &l); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", n, err)
		}
		if !Known(l.Kind) {
			return nil, fmt.Errorf("history: line %d: unknown event kind %q", n, l.Kind)
		}
		data, err := base64.StdEncoding.DecodeString(l.Data)
		if err != nil {
			return nil, fmt.Errorf("history: line %d: data: %w", n, err)
		}
		if err := checkData(data); err != nil {
			return nil, fmt.Errorf("history: line %d: data: %w", n, err)
		}
		// replay folds only seqs past the last it folded (from 0), so events at seq 0 or below
		// would be skipped without a word, and a history from a later seq has no RunStarted.
		if len(out) == 0 && l.Seq != 1 {
			return nil, fmt.Errorf("history: line %d: the first event is seq %d; a history starts at seq 1 (its RunStarted)", n, l.Seq)
		}
		if len(out) > 0 && l.Seq != out[len(out)-1].Seq+1 {
			return nil, fmt.Errorf("history: line %d: seq %d follows %d; a history is contiguous", n, l.Seq, out[len(out)-1].Seq)
		}
		out = append(out, Event{Seq: l.Seq, Kind: l.Kind, Name: l.Name, At: l.At, Data: data})
		if rerr == io.EOF {
			break
		}
	}
	return out, nil
}

// loadLine is dumpLine without its view, which Load does not read.
type loadLine struct {
	Seq  int64     `json:"seq"`
	Kind Kind      `json:"kind"`
	Name string    `json:"name,omitempty"`
	At   time.Time `json:"at"`
	Data string    `json:"data"`
}

// View decodes an event's payload into plain values for display: msgpack values nested inside
// (inputs, outputs, payloads) are decoded too.
func View(e Event) any { return ViewWith(e, nil) }

// ViewWith is View with payloads a codec encoded opened by open; without open, or when it
// fails, such a payload shows as what it is. A child's result, inside the outcome its parent's
// EventReceived carries, is one of those payloads (ReceivedView).
func ViewWith(e Event, open Opener) any {
	var m map[string]any
	if err := msgpack.Unmarshal(e.Data, &m); err != nil {
		return nil
	}
	eventID, _ := m["event_id"].(string)
	for k, v := range m {
		b, ok := v.([]byte)
		if !ok {
			m[k] = JSONable(v)
			continue
		}
		var view any
		var err error
		if e.Kind == KindEventReceived && k == "payload" {
			view, err = ReceivedView(eventID, b, open)
		} else {
			view, err = ValueView(b, open)
		}
		if err != nil {
			view = JSONable(v) // not a stored value: its bytes, as they are
		}
		m[k] = view
	}
	return m
}

// ValueView returns a stored value (a run's input, a step's output, an event's payload, a
// result) as plain values for people: msgpack decoded, and an envelope opened by open, or, with
// no open or when it fails, shown as what it is ("encrypted by codec aesgcm/k1, 48 bytes"). An
// empty value is nil. The error says b is neither msgpack nor an envelope.
func ValueView(b []byte, open Opener) (any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if open != nil && codec.IsEnvelope(b) {
		if plain, err := open(b); err == nil {
			b = plain
		}
	}
	if what, ok := codec.Describe(b); ok {
		return what, nil
	}
	var v any
	if err := msgpack.Unmarshal(b, &v); err != nil {
		// msgpack knows no envelope extension, so a value carrying one inside (an event whose
		// field a codec sealed: every surface stores it, wire.Value) failed whole and showed as
		// nothing. Walked again, each envelope shows as a whole value does.
		if v, werr := sealedInside(b, open); werr == nil {
			return v, nil
		}
		return nil, err
	}
	return JSONable(v), nil
}

// sealedInside is ValueView of a value holding codec envelopes at any depth: its maps and arrays
// walked, each envelope shown as ValueView shows a whole one (opened by open, or described), and
// every other value decoded as msgpack decodes it.
func sealedInside(b []byte, open Opener) (any, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	var view func(depth int) (any, error)
	view = func(depth int) (any, error) {
		if depth > maxViewDepth {
			return nil, errors.New("nested too deep")
		}
		c, err := dec.PeekCode()
		if err != nil {
			return nil, err
		}
		switch {
		case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
			n, err := dec.DecodeMapLen()
			if err != nil {
				return nil, err
			}
			m := make(map[string]any, min(n, 1024))
			for range n {
				k, err := dec.DecodeInterface()
				if err != nil {
					return nil, err
				}
				if m[fmt.Sprint(k)], err = view(depth + 1); err != nil {
					return nil, err
				}
			}
			return m, nil
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			n, err := dec.DecodeArrayLen()
			if err != nil {
				return nil, err
			}
			a := make([]any, 0, min(n, 1024))
			for range n {
				e, err := view(depth + 1)
				if err != nil {
					return nil, err
				}
				a = append(a, e)
			}
			return a, nil
		case msgpcode.IsExt(c):
			raw, err := dec.DecodeRaw()
			if err != nil {
				return nil, err
			}
			if codec.IsEnvelope(raw) {
				return ValueView(raw, open)
			}
			var v any
			err = msgpack.Unmarshal(raw, &v)
			return JSONable(v), err
		}
		v, err := dec.DecodeInterface()
		return JSONable(v), err
	}
	return view(0)
}

// maxViewDepth bounds the nesting sealedInside walks (a stored value is bounded far below it).
const maxViewDepth = 1000

// ReceivedView is ValueView of the payload an EventReceived delivered, eventID its event id.
// A child's outcome (IsChildEventID) is stored in the clear, since the engine writes it without
// a key, but the child's result inside it is stored as the child's worker wrote it: an envelope
// when that worker encodes. So the result is shown as a stored value is, one level down, the way
// codec/wrap opens it for replay; otherwise every view would show the envelope's raw bytes.
func ReceivedView(eventID string, payload []byte, open Opener) (any, error) {
	if !IsChildEventID(eventID) {
		return ValueView(payload, open)
	}
	var o map[string]any
	if err := msgpack.Unmarshal(payload, &o); err != nil {
		return ValueView(payload, open) // not an outcome after all: shown as any payload is
	}
	for k, v := range o {
		if b, ok := v.([]byte); ok && k == childOutcomeResult {
			if view, err := ValueView(b, open); err == nil {
				o[k] = view
				continue
			}
		}
		o[k] = JSONable(v)
	}
	return o, nil
}

// childOutcomeResult is the msgpack name of jobs.ChildOutcome's Result. The outcome is read here
// as the map msgpack writes, not as the type: jobs imports history, so history cannot import
// jobs. codec/wrap's tests view a jobs.ChildOutcome, which keeps the two in step.
const childOutcomeResult = "result"

// Table writes events as an aligned table for people.
func Table(w io.Writer, events []Event) error { return TableWith(w, events, nil) }

// TableWith is Table with payloads a codec encoded opened by open.
func TableWith(w io.Writer, events []Event, open Opener) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tKIND\tNAME\tDETAIL")
	for _, e := range events {
		detail := ""
		if v := ViewWith(e, open); v != nil {
			if m, ok := v.(map[string]any); ok {
				delete(m, "name") // the NAME column's
			}
			b, _ := json.Marshal(v)
			detail = string(b)
		}
		// A step's name and what it recorded are the worker's to choose: shown escaped, so a
		// control character cannot drive the terminal or break the columns, and clipped.
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Seq, e.At.UTC().Format(time.RFC3339Nano), termtext.Cell(string(e.Kind), 0),
			termtext.Cell(e.Name, 40), termtext.Cell(detail, 100))
	}
	return tw.Flush()
}

// checkData refuses an event's data that is not one well-formed msgpack value whose every length
// fits the bytes present, nor the msgpack values it carries as bytes (an input, an output, a
// payload; a codec's envelope is left to its codec). A decoder makes what a length claims before
// it reads it: an 84-byte line of a hand-edited or truncated dump whose input claimed 4 GiB made
// a test that loaded it allocate that much, or die out of memory. What the engine stores went
// through the same check on the way in; a dump is a file anyone may have touched.
func checkData(data []byte) error {
	if err := wellFormed(data); err != nil {
		return err
	}
	var m map[string]any
	if err := msgpack.Unmarshal(data, &m); err != nil {
		return err
	}
	for k, v := range m {
		if b, ok := v.([]byte); ok && len(b) > 0 && !codec.IsEnvelope(b) {
			if err := wellFormed(b); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	return nil
}

// wellFormed reports whether b is exactly one msgpack value whose lengths fit b.
func wellFormed(b []byte) error {
	r := msgp.NewReader(b)
	if err := r.Skip(0); err != nil {
		return errors.New("not one well-formed msgpack value (a length past its bytes, or nested too deep)")
	}
	if !r.Done() {
		return errors.New("bytes after its msgpack value")
	}
	return nil
}
