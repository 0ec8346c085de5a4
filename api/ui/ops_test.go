package ui_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// The backfills, schedules and manifest pages render the engine's (and the scheduler's)
// projections, on every store.
func TestOpsPages(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testenv.Options{}, func(t *testing.T, env *testenv.Env) {
		runs := seed(t, env)
		ops := seedOps(t, env)
		b := newBrowser(t, serveOps(t, env, ops.sched, ""))

		st, body := b.get("/_x/backfills")
		want(t, "backfills", st, body, http.StatusOK, "tag-accounts", "reindex", "purge-legacy",
			`id="running"`, `<progress max="100" value="33.3"`, "10 <span class=\"muted\">of 30 · 33.3%</span>",
			"<th>production</th>", "<th>staging</th>",
			"20260101_drop_legacy", ops.completedPass, ops.runningPass, "only production, staging", "Last checkpoint",
			`<meta http-equiv="refresh" content="15">`)
		if strings.Contains(body, "any environment") {
			t.Error("backfills: an 'any environment' column beside the named ones")
		}
		st, body = b.get("/_x/backfills?env=dev")
		want(t, "backfills for dev", st, body, http.StatusOK, "<th>dev</th>", `value="dev"`)
		// Each backfill's row, one state per column: dev, production, staging (sorted).
		for name, states := range map[string][]string{
			"purge-legacy": {"excluded", "pending", "pending"},
			"reindex":      {"running", "running", "running"},
			"tag-accounts": {"completed", "completed", "completed"},
		} {
			row := rowOf(t, body, `<td class="mono nowrap">`+name)
			if got := stateRe.FindAllStringSubmatch(row, -1); len(got) != 3 || got[0][1] != states[0] || got[1][1] != states[1] || got[2][1] != states[2] {
				t.Errorf("backfills: %s reads %v, want %v", name, got, states)
			}
		}

		st, body = b.get("/_x/runs/" + ops.runningPass)
		want(t, "a pass's run page", st, body, http.StatusOK, `id="backfill"`, "Backfill pass", "33.3%", "Last checkpoint")
		st, body = b.get("/_x/runs/" + ops.completedPass)
		want(t, "a completed pass's run page", st, body, http.StatusOK, `id="backfill"`, "tag-accounts", `state s-completed`)
		st, body = b.get("/_x/runs/" + runs[store.StateCompleted])
		want(t, "an ordinary run page", st, body, http.StatusOK)
		if strings.Contains(body, `id="backfill"`) {
			t.Error("a run that is no backfill pass shows a ledger row")
		}

		st, body = b.get("/_x/schedules")
		want(t, "schedules", st, body, http.StatusOK, "hourly-report", "nightly-cleanup", "Europe/Berlin", "America/New_York",
			"<code>0 * * * *</code>", "run-once", `id="leader"`, "engine-a", "leads.", `state s-active`, "watermark",
			"act-pause", "act-trigger", `data-confirm="Pause schedule hourly-report?`)
		if n := strings.Count(body, `<ol class="fires">`); n != 2 {
			t.Errorf("schedules: %d lists of next fires, want 2", n)
		}
		if n := strings.Count(body, `<time class="rel"`); n < 6 {
			t.Errorf("schedules: %d times, want at least the next 3 fires of each", n)
		}

		st, body = b.get("/_x/manifest")
		want(t, "manifest", st, body, http.StatusOK, "sweeper-1", "manual-worker", "tag-accounts", "purge-legacy", "ship",
			`state s-live`, ">backfill<", ">job<", "in flight")
		if strings.Contains(body, "http-equiv") {
			t.Error("the manifest page reloads itself")
		}
		// Each worker's runs in flight: manual-worker holds the seeded running run, sweeper-1
		// the reindex pass.
		for _, w := range []string{"manual-worker", "sweeper-1"} {
			if row := rowOf(t, body, `<td class="mono">`+w); !strings.Contains(row, `<td class="num">1</td>`) {
				t.Errorf("manifest: %s's row %q does not show 1 in flight", w, row)
			}
		}
	})
}

// Bad input on the new pages is a clear X_ refusal.
func TestOpsRefusals(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ops := seedOps(t, env)
	b := newBrowser(t, serveOps(t, env, ops.sched, ""))
	st, body := b.get("/_x/backfills?env=%00")
	want(t, "env with NUL", st, body, http.StatusBadRequest, "X_BAD_REQUEST")
	_, page := b.get("/_x/schedules")
	token := csrf(t, page)
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/_x/schedules/nope/pause", 404, "X_SCHEDULE_NOT_FOUND"},
		{"/_x/schedules/nope/trigger", 404, "X_SCHEDULE_NOT_FOUND"},
		{"/_x/schedules/hourly-report/explode", 400, "X_BAD_REQUEST"},
		{"/_x/schedules/bad%00name/pause", 400, "X_BAD_REQUEST"},
	} {
		st, body, _ := b.post(c.path, url.Values{"csrf": {token}})
		want(t, "POST "+c.path, st, body, c.status, c.code)
	}
	if paused(t, ops.sched, "hourly-report") || len(manualRuns(t, env, "hourly-report")) != 0 {
		t.Error("a refused action changed the schedule")
	}
}

// Pause, resume and trigger: the CSRF token is required, and the scheduler's state (and, for a
// trigger, a new run) reflects each.
func TestScheduleActions(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ops := seedOps(t, env)
	b := newBrowser(t, serveOps(t, env, ops.sched, ""))
	_, page := b.get("/_x/schedules")
	token := csrf(t, page)

	for _, form := range []url.Values{{}, {"csrf": {"forged"}}} {
		st, body, _ := b.post("/_x/schedules/hourly-report/pause", form)
		want(t, "pause without the session's CSRF token", st, body, http.StatusForbidden, "X_FORBIDDEN")
		st, body, _ = b.post("/_x/schedules/hourly-report/trigger", form)
		want(t, "trigger without the session's CSRF token", st, body, http.StatusForbidden, "X_FORBIDDEN")
	}
	if paused(t, ops.sched, "hourly-report") || len(manualRuns(t, env, "hourly-report")) != 0 {
		t.Fatal("an action without its CSRF token changed the schedule")
	}

	st, body, hdr := b.post("/_x/schedules/hourly-report/pause", url.Values{"csrf": {token}})
	want(t, "pause", st, body, http.StatusSeeOther)
	if loc := hdr.Get("Location"); loc != "/_x/schedules?notice=paused" {
		t.Errorf("pause redirects to %q", loc)
	}
	if !paused(t, ops.sched, "hourly-report") {
		t.Fatal("the schedule is not paused")
	}
	st, body = b.get("/_x/schedules?notice=paused")
	want(t, "after pause", st, body, http.StatusOK, "the schedule is paused", `state s-paused`, "act-resume")

	st, body, _ = b.post("/_x/schedules/hourly-report/resume", url.Values{"csrf": {token}})
	want(t, "resume", st, body, http.StatusSeeOther)
	if paused(t, ops.sched, "hourly-report") {
		t.Fatal("the schedule is still paused")
	}

	st, body, hdr = b.post("/_x/schedules/nightly-cleanup/trigger", url.Values{"csrf": {token}})
	want(t, "trigger", st, body, http.StatusSeeOther)
	got := manualRuns(t, env, "nightly-cleanup")
	if len(got) != 1 {
		t.Fatalf("trigger made runs %v, want one", got)
	}
	if loc := hdr.Get("Location"); loc != "/_x/runs/"+got[0]+"?notice=triggered" {
		t.Errorf("trigger redirects to %q, want its run", loc)
	}
	st, body = b.get("/_x/runs/" + got[0] + "?notice=triggered")
	want(t, "the triggered run", st, body, http.StatusOK, "the schedule fired now", "schedule:nightly-cleanup:manual")
	st, body = b.get("/_x/runs/" + got[0] + "?notice=%3Cscript%3E")
	want(t, "an unknown notice", st, body, http.StatusOK)
	if strings.Contains(body, `class="notice"`) || strings.Contains(body, "script&gt;") {
		t.Error("the page echoes a notice that is not one of its own")
	}
}

// A viewer sees the pages without action buttons, and its forged POSTs are refused (403,
// X_FORBIDDEN) and change nothing; an operator acts.
func TestOpsRoles(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	runs := seed(t, env)
	ops := seedOps(t, env)
	base := serveOps(t, env, ops.sched, "", api.Credential{Token: "view", Role: api.RoleViewer}, api.Credential{Token: "op", Role: api.RoleOperator})

	viewer := newBrowser(t, base)
	st, body, _ := viewer.post("/_x/login", url.Values{"token": {"view"}})
	want(t, "a viewer logs in", st, body, http.StatusSeeOther)
	for _, p := range []string{"/_x/schedules", "/_x/backfills", "/_x/manifest", "/_x/runs/" + runs[store.StateReady], "/_x/runs/" + runs[store.StateFailed]} {
		st, body := viewer.get(p)
		want(t, "a viewer looks at "+p, st, body, http.StatusOK)
		for _, button := range []string{"act-pause", "act-resume", "act-trigger", `id="cancel"`, `id="retry"`} {
			if strings.Contains(body, button) {
				t.Errorf("a viewer sees the action %s on %s", button, p)
			}
		}
	}
	_, page := viewer.get("/_x/runs")
	token := csrf(t, page) // the viewer's own session's token: only the role stops the POST
	for _, verb := range []string{"pause", "trigger"} {
		st, body, _ := viewer.post("/_x/schedules/hourly-report/"+verb, url.Values{"csrf": {token}})
		want(t, "a viewer's "+verb, st, body, http.StatusForbidden, "X_FORBIDDEN")
		st, body, _ = viewer.post("/_x/schedules/hourly-report/"+verb, url.Values{}, "Authorization", "Bearer view")
		want(t, "a viewer's bearer "+verb, st, body, http.StatusForbidden, "X_FORBIDDEN")
	}
	if paused(t, ops.sched, "hourly-report") || len(manualRuns(t, env, "hourly-report")) != 0 {
		t.Fatal("a viewer's refused action changed the schedule")
	}

	op := newBrowser(t, base)
	st, body, _ = op.post("/_x/login", url.Values{"token": {"op"}})
	want(t, "an operator logs in", st, body, http.StatusSeeOther)
	_, page = op.get("/_x/schedules")
	want(t, "an operator's schedules", http.StatusOK, page, http.StatusOK, "act-pause", "act-trigger")
	st, body, _ = op.post("/_x/schedules/hourly-report/pause", url.Values{"csrf": {csrf(t, page)}})
	want(t, "an operator pauses", st, body, http.StatusSeeOther)
	if !paused(t, ops.sched, "hourly-report") {
		t.Fatal("an operator's pause did not pause")
	}
}

// An engine without a scheduler says so on the schedules page, and refuses its actions with
// X_NO_SCHEDULER.
func TestSchedulesWithoutScheduler(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	b := newBrowser(t, serve(t, env, "tok"))
	st, body, _ := b.post("/_x/login", url.Values{"token": {"tok"}})
	want(t, "log in", st, body, http.StatusSeeOther)
	st, body = b.get("/_x/schedules")
	want(t, "schedules without a scheduler", st, body, http.StatusOK, `id="no-scheduler"`, "This engine runs no scheduler")
	st, body, _ = b.post("/_x/schedules/hourly-report/pause", url.Values{"csrf": {csrf(t, body)}})
	want(t, "pause without a scheduler", st, body, http.StatusNotFound, "X_NO_SCHEDULER")
	st, body = b.get("/_x/backfills")
	want(t, "backfills, none declared", st, body, http.StatusOK, "No backfill is declared", "No pass has run yet")
	st, body = b.get("/_x/manifest")
	want(t, "manifest, empty", st, body, http.StatusOK, "No worker has sent a manifest", "Nothing is declared yet")
}

// A worker that stopped resending its manifest reads stale, and so does what only it declares.
func TestManifestStaleWorker(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	testenv.Declare(t, env.Engine, "w-old", testenv.Untyped("legacy-export", "q"))
	env.Fake().Advance(time.Hour)
	testenv.Declare(t, env.Engine, "w-new", testenv.Untyped("export", "q"))
	b := newBrowser(t, serve(t, env, ""))
	st, body := b.get("/_x/manifest")
	want(t, "manifest", st, body, http.StatusOK, "1h ago")
	for name, state := range map[string]string{
		`<td class="mono">w-old`: "stale", `<td class="mono">w-new`: "live",
		`<td class="mono">legacy-export`: "stale", `<td class="mono">export`: "live",
	} {
		if got := stateRe.FindAllStringSubmatch(rowOf(t, body, name), -1); len(got) != 1 || got[0][1] != state {
			t.Errorf("manifest: %s reads %v, want %s", name, got, state)
		}
	}
}

var stateRe = regexp.MustCompile(`<span class="state s-([a-z-]+)">`)

// rowOf returns the table row of page that starts with the cell start.
func rowOf(t *testing.T, page, start string) string {
	t.Helper()
	i := strings.Index(page, start)
	if i < 0 {
		t.Fatalf("no row %q", start)
	}
	end := strings.Index(page[i:], "</tr>")
	if end < 0 {
		t.Fatalf("row %q does not end", start)
	}
	return page[i : i+end]
}
