package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
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

// clip shortens s to n runes for a table cell.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func printQueues(w io.Writer, qs []engine.QueueView) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "QUEUE\tREADY\tDELAYED\tRUNNING\tSUSPENDED\tBLOCKED\tCOMPLETED\tFAILED\tCANCELLED\tOLDEST READY")
	for _, q := range qs {
		oldest := "-"
		if q.Counts[store.StateReady] > 0 {
			oldest = (time.Duration(q.OldestReadySeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", q.Queue, q.Counts[store.StateReady], q.Counts[store.StateDelayed],
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Job, r.Queue, r.State, r.Attempt, orDash(r.Tenant),
			when(now, r.CreatedAt), clip(orDash(r.ErrorCode), 40))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "more: --before %s\n", page.Next)
	}
	return nil
}

func printDeadLetters(w io.Writer, now time.Time, page api.RunPage, full bool) error {
	if len(page.Runs) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tJOB\tQUEUE\tATTEMPT\tSTOP\tFAILED\tERROR")
	for _, r := range page.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Job, r.Queue, r.Attempt, orDash(r.StopReason),
			whenPtr(now, r.FinishedAt), errorCell(r.Error, full))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "more: --before %s\n", page.Next)
	}
	return nil
}

// printRun renders one run: its fields, then the per-step trace, the failed attempts and the
// operators' retries.
func printRun(w io.Writer, now time.Time, v engine.RunView) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("Run", v.ID)
	row("Job", v.Job+" (queue "+v.Queue+")")
	row("State", string(v.State))
	row("Attempt", fmt.Sprint(v.Attempt))
	row("Key", v.Key)
	row("Tenant", orDash(v.Tenant))
	enq := when(now, v.CreatedAt)
	if v.EnqueuedBy != "" {
		enq += " by " + v.EnqueuedBy
	}
	row("Enqueued", enq)
	if v.Parent != nil {
		row("Parent", fmt.Sprintf("%s (%s, %s) via %q", v.Parent.ParentID, v.Parent.Job, v.Parent.State, v.Parent.Name))
	}
	if v.TraceID != "" {
		row("Trace", v.TraceID)
	}
	row("Updated", when(now, v.UpdatedAt))
	if v.FinishedAt != nil {
		row("Finished", whenPtr(now, v.FinishedAt))
	}
	if v.WorkerID != "" {
		row("Worker", v.WorkerID)
	}
	if v.ErrorCode != "" || v.Error != "" {
		e := v.Error
		// The stop reason only where the message does not already give it (the worker's verdict
		// says "… is terminal" or "attempts exhausted"): one message says it once.
		if stop := v.StopReason; stop != "" && !strings.Contains(e, stop) && !strings.Contains(e, strings.ReplaceAll(stop, "-", " ")) {
			e += " [stop: " + stop + "]"
		}
		row("Error", e)
	}
	if v.Waiting != "" {
		row("Waiting", v.Waiting)
	}
	row("Input", clip(string(v.Input), 200))
	if len(v.Result) > 0 {
		row("Result", clip(string(v.Result), 200))
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
				detail = s.Note
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
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", s.Seq, s.Kind, s.Name, s.Status, when(now, s.At), clip(detail, 80))
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
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, orDash(a.Code), orDash(a.Step), orDash(a.Stop),
				when(now, a.At), whenPtr(now, a.RetryAt), clip(a.Error, 100))
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
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", when(now, r.At), orDash(r.By), orDash(r.FromStep), orDash(r.Reason))
		}
		return tw.Flush()
	}
	return nil
}

// errorCell is a run's error in a table: clipped to 80 characters unless full, and on one line
// either way (a newline would break the table's columns).
func errorCell(msg string, full bool) string {
	msg = strings.Join(strings.Fields(orDash(msg)), " ")
	if full {
		return msg
	}
	return clip(msg, 80)
}
