package ui_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ultimat3/jobs/internal/testenv"
)

// driver is what driveConsole hands the steps of the operators' pages: run actions as one
// checked step, take a screenshot, read an element's text into *text.
type driver struct {
	step func(what string, actions ...chromedp.Action[chromedp.Void])
	shot func(name string) chromedp.Action[chromedp.Void]
	read func(sel string) chromedp.Action[chromedp.Void]
	text *string
}

// driveOps loads the backfills, schedules and manifest pages (each without a console error,
// which step checks) and pauses, resumes and triggers a schedule through the confirmation.
func driveOps(t *testing.T, base string, d driver, env *testenv.Env, ops opsSeeded) {
	d.step("backfills",
		chromedp.Navigate(base+"/_x/backfills?env=dev"), // dev: a column where purge-legacy is excluded
		chromedp.WaitVisible(chromedp.CSS(`#running progress`)),
		d.read(`#declared`),
		d.shot("backfills"),
	)
	for _, s := range []string{"tag-accounts", "reindex", "purge-legacy", "excluded", "completed", "running", "pending"} {
		if !strings.Contains(*d.text, s) {
			t.Errorf("backfills: the ledger lacks %q: %q", s, *d.text)
		}
	}
	d.step("a backfill pass's run",
		chromedp.Navigate(base+"/_x/runs/"+ops.runningPass),
		chromedp.WaitVisible(chromedp.CSS(`#backfill progress`)),
		d.read(`#backfill`),
		d.shot("run-backfill"),
	)
	if !strings.Contains(*d.text, "33.3%") {
		t.Errorf("the pass's run page lacks its progress: %q", *d.text)
	}

	row := func(name string) string { return `tr[data-schedule="` + name + `"] ` }
	d.step("schedules",
		chromedp.Navigate(base+"/_x/schedules"),
		chromedp.WaitVisible(chromedp.CSS(`#schedules`)),
		d.read(`#schedules`),
		d.shot("schedules"),
	)
	if !strings.Contains(*d.text, "Europe/Berlin") || !strings.Contains(*d.text, "nightly-cleanup") {
		t.Errorf("schedules: %q", *d.text)
	}
	d.step("pause a schedule",
		chromedp.Click(chromedp.CSS(row("hourly-report")+`.act-pause`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
		d.shot("confirm-pause"),
		chromedp.Click(chromedp.CSS(`#confirm-yes`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
		chromedp.WaitVisible(chromedp.CSS(row("hourly-report")+`.act-resume`)),
		d.shot("schedules-paused"),
	)
	if !paused(t, ops.sched, "hourly-report") {
		t.Error("the browser's pause did not pause the schedule")
	}
	d.step("resume it",
		chromedp.Click(chromedp.CSS(row("hourly-report")+`.act-resume`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
		chromedp.Click(chromedp.CSS(`#confirm-yes`)),
		chromedp.WaitVisible(chromedp.CSS(row("hourly-report")+`.act-pause`)),
	)
	if paused(t, ops.sched, "hourly-report") {
		t.Error("the browser's resume left the schedule paused")
	}
	d.step("trigger a schedule",
		chromedp.Click(chromedp.CSS(row("nightly-cleanup")+`.act-trigger`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
		chromedp.Click(chromedp.CSS(`#confirm-yes`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
		chromedp.WaitVisible(chromedp.CSS(`.timeline`)),
		d.shot("run-triggered"),
	)
	if got := manualRuns(t, env, "nightly-cleanup"); len(got) != 1 {
		t.Errorf("the browser's trigger made runs %v, want one", got)
	}

	d.step("manifest and workers",
		chromedp.Navigate(base+"/_x/manifest"),
		chromedp.WaitVisible(chromedp.CSS(`#workers`)),
		d.read(`#workers`),
		d.shot("manifest"),
	)
	for _, s := range []string{"sweeper-1", "manual-worker", "live"} {
		if !strings.Contains(*d.text, s) {
			t.Errorf("manifest: the workers lack %q: %q", s, *d.text)
		}
	}
}
