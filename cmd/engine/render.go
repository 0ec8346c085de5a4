package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/internal/termtext"
	"github.com/ultimat3/jobs/store"
)

// Human output: aligned tables, times as "how long ago" followed by the RFC 3339 instant (the
// first to read, the second to paste into a query). --json prints the API's own documents.

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// ago renders t relative to now: "4s ago", "3m ago", "2h5m ago", "in 10m".
func ago(now, t time.Time) string {
	d := now.Sub(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, ""
	}
	var s string
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m != 0 && h < 10 {
			s = fmt.Sprintf("%dh%dm", h, m)
		} else {
			s = fmt.Sprintf("%dh", h)
		}
	default:
		s = fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	if suffix == "" {
		return "in " + s
	}
	return s + suffix
}

// when renders a time for people: relative, then exact.
func when(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return ago(now, t) + " (" + t.UTC().Format(time.RFC3339) + ")"
}

func whenPtr(now time.Time, t *time.Time) string {
	if t == nil {
		return "-"
	}
	return when(now, *t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Widths at which a table clips a cell (cell): identifiers (job, queue, tenant, key, --by) and
// errors. A listing is for scanning; --json, and `jobs show` for one run's own fields, print
// every value whole.
const (
	identWidth = 40
	errorWidth = 80
)

// cell is termtext.Cell: every value that reaches a table or a header block goes through it.
var cell = termtext.Cell

func printQueues(w io.Writer, qs []engine.QueueView) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "QUEUE\tREADY\tDELAYED\tRUNNING\tSUSPENDED\tBLOCKED\tCOMPLETED\tFAILED\tCANCELLED\tOLDEST READY")
	for _, q := range qs {
		oldest := "-"
		if q.Counts[store.StateReady] > 0 {
			oldest = (time.Duration(q.OldestReadySeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", cell(q.Queue, identWidth), q.Counts[store.StateReady], q.Counts[store.StateDelayed],
			q.Counts[store.StateRunning], q.Counts[store.StateSuspended], q.Counts[store.StateBlocked], q.Counts[store.StateCompleted],
			q.Counts[store.StateFailed], q.Counts[store.StateCancelled], oldest)
	}
	return tw.Flush()
}

func printRuns(w io.Writer, now time.Time, page api.RunPage) error {
	if len(page.Runs) == 0 {
		fmt.Fprintln(w, "no runs")
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tJOB\tQUEUE\tSTATE\tATTEMPT\tTENANT\tCREATED\tERROR")
	for _, r := range page.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", cell(r.ID, 0), cell(r.Job, identWidth), cell(r.Queue, identWidth),
			cell(string(r.State), 0), r.Attempt, cell(orDash(r.Tenant), identWidth), when(now, r.CreatedAt), cell(orDash(r.ErrorCode), identWidth))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "more: --before %s\n", cell(page.Next, 0))
	}
	return nil
}

func printDeadLetters(w io.Writer, now time.Time, page api.RunPage, full bool) error {
	if len(page.Runs) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return nil
	}
	// --full prints every cell whole, the identifiers as well as the error.
	ident := identWidth
	if full {
		ident = 0
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tJOB\tQUEUE\tATTEMPT\tSTOP\tFAILED\tERROR")
	for _, r := range page.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", cell(r.ID, 0), cell(r.Job, ident), cell(r.Queue, ident), r.Attempt,
			cell(orDash(r.StopReason), ident), whenPtr(now, r.FinishedAt), errorCell(r.Error, full))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "more: --before %s\n", cell(page.Next, 0))
	}
	return nil
}

// printRun renders one run: its fields, then the per-step trace, the failed attempts and the
// operators' retries. The header block prints each of the run's own fields whole (escaped by
// cell): it is the one place a clipped key or tenant of a listing can be read in full.
func printRun(w io.Writer, now time.Time, v engine.RunView) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("Run", cell(v.ID, 0))
	row("Job", cell(v.Job, 0)+" (queue "+cell(v.Queue, 0)+")")
	row("State", cell(string(v.State), 0))
	row("Attempt", fmt.Sprint(v.Attempt))
	row("Key", cell(v.Key, 0))
	row("Tenant", cell(orDash(v.Tenant), 0))
	enq := when(now, v.CreatedAt)
	if v.EnqueuedBy != "" {
		enq += " by " + cell(v.EnqueuedBy, 0)
	}
	row("Enqueued", enq)
	if v.Parent != nil {
		row("Parent", fmt.Sprintf("%s (%s, %s) via %s", cell(v.Parent.ParentID, 0), cell(v.Parent.Job, 0),
			cell(string(v.Parent.State), 0), cell(strconv.Quote(v.Parent.Name), 0)))
	}
	if v.TraceID != "" {
		row("Trace", cell(v.TraceID, 0))
	}
	row("Updated", when(now, v.UpdatedAt))
	if v.DueAt != nil {
		row("Due", whenPtr(now, v.DueAt))
	}
	if v.FinishedAt != nil {
		row("Finished", whenPtr(now, v.FinishedAt))
	}
	if v.WorkerID != "" {
		row("Worker", cell(v.WorkerID, 0))
	}
	if v.ErrorCode != "" || v.Error != "" {
		e := v.Error
		// The stop reason only where the message does not already give it (the worker's verdict
		// says "… is terminal" or "attempts exhausted"): one message says it once.
		if stop := v.StopReason; stop != "" && !strings.Contains(e, stop) && !strings.Contains(e, strings.ReplaceAll(stop, "-", " ")) {
			e += " [stop: " + stop + "]"
		}
		row("Error", errorCell(e, true))
	}
	if v.Waiting != "" {
		row("Waiting", cell(v.Waiting, 0))
	}
	row("Input", cell(string(v.Input), 200))
	if len(v.Result) > 0 {
		row("Result", cell(string(v.Result), 200))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if err := printChildren(w, now, v.Children); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nSteps")
	if len(v.Steps) == 0 {
		fmt.Fprintln(w, "  none yet")
	} else {
		tw = newTable(w)
		fmt.Fprintln(tw, "  SEQ\tKIND\tNAME\tSTATUS\tAT\tDETAIL")
		for _, s := range v.Steps {
			detail := ""
			switch {
			case s.Note != "":
				detail = oneLine(s.Note)
			case s.Kind == "sleep" && s.WakeAt != nil && s.Ended == nil:
				detail = "wakes " + when(now, *s.WakeAt)
			case s.Kind == "sleep" && s.Ended != nil:
				detail = "woke " + when(now, *s.Ended)
				if late := time.Duration(s.LateSeconds * float64(time.Second)); late >= time.Millisecond {
					detail += fmt.Sprintf(" (%s late)", late.Round(time.Millisecond))
				}
			case s.Kind == "wait" && s.Ended == nil:
				detail = "for " + s.Event
			case len(s.Output) > 0:
				detail = string(s.Output)
				if s.Kind == "wait" {
					detail = s.Event + " " + detail
				}
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", s.Seq, cell(s.Kind, 0), cell(s.Name, identWidth), cell(s.Status, 0),
				when(now, s.At), cell(detail, errorWidth))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(v.Attempts) > 0 {
		fmt.Fprintln(w, "\nFailed attempts")
		tw = newTable(w)
		fmt.Fprintln(tw, "  ATTEMPT\tCODE\tSTEP\tSTOP\tAT\tRETRY\tERROR")
		for _, a := range v.Attempts {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, cell(orDash(a.Code), identWidth), cell(orDash(a.Step), identWidth),
				cell(orDash(a.Stop), 0), when(now, a.At), whenPtr(now, a.RetryAt), cell(oneLine(a.Error), 100))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(v.Retries) > 0 {
		fmt.Fprintln(w, "\nRetries")
		tw = newTable(w)
		fmt.Fprintln(tw, "  AT\tBY\tFROM STEP\tREASON")
		for _, r := range v.Retries {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", when(now, r.At), cell(orDash(r.By), identWidth), cell(orDash(r.FromStep), identWidth),
				cell(oneLine(orDash(r.Reason)), errorWidth))
		}
		return tw.Flush()
	}
	return nil
}

// oneLine joins a text's lines, and its runs of spaces, into single spaces: an error, a reason or
// a step's output reads on one line in a table rather than with its line breaks escaped.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// errorCell is a run's error in a table: clipped to errorWidth unless full, and on one line
// either way (a newline would break the table's columns).
func errorCell(msg string, full bool) string {
	width := errorWidth
	if full {
		width = 0
	}
	return cell(oneLine(orDash(msg)), width)
}
