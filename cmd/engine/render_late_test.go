package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/engine"
)

// The trace prints when a sleep truly woke and how late: after an outage the history says so.
func TestShowPrintsTheTrueWakeTimeAndLateness(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	due, woke := now.Add(-time.Minute), now.Add(-40*time.Second)
	v := engine.RunView{RunSummary: engine.RunSummary{ID: "r", State: "completed"}, Steps: []engine.StepView{
		{Seq: 2, Kind: "sleep", Name: "nap", Status: "woke", At: now.Add(-time.Hour), WakeAt: &due, Ended: &woke, LateSeconds: 20},
		{Seq: 4, Kind: "sleep", Name: "ontime", Status: "woke", At: now.Add(-time.Hour), WakeAt: &due, Ended: &due},
	}}
	var b bytes.Buffer
	if err := printRun(&b, now, v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "woke 40s ago") || !strings.Contains(out, "(20s late)") {
		t.Errorf("trace does not show the true wake time and lateness:\n%s", out)
	}
	if strings.Count(out, "late)") != 1 {
		t.Errorf("a sleep that woke on time is shown late:\n%s", out)
	}
}
