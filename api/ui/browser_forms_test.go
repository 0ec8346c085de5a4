package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// formSteps are the completed steps of formsRun: names a page collapses ("load", " load",
// "a  b") or a form cannot post as they are (a line break).
var formSteps = []string{"load", " load", "a  b", "x\ny"}

// formsRun makes a failed run whose completed steps are formSteps.
func formsRun(t *testing.T, env *testenv.Env) string {
	t.Helper()
	ctx := context.Background()
	res, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "import", Queue: "manual", Key: "steps", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("import", "manual"))
	tasks, err := env.Engine.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"manual"}, Max: 1})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("poll: %v %v", tasks, err)
	}
	one, _ := jobs.Encode(1)
	var cmds []frontend.Command
	for _, n := range formSteps {
		cmds = append(cmds, frontend.Command{Kind: frontend.CmdStep, Name: n, Output: one})
	}
	cmds = append(cmds, frontend.Command{Kind: frontend.CmdFail, Attempt: 1, Stop: "terminal", Code: string(jobs.CodeBadRequest), Error: "boom"})
	if _, err := env.Engine.Record(ctx, frontend.RecordRequest{RunID: res.RunID, Fence: tasks[0].Fence, WorkerID: "w", LeaseToken: tasks[0].LeaseToken,
		AfterSeq: tasks[0].LastSeq, Commands: cmds}); err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateFailed)
	return res.RunID
}

// retriedFrom is the step of the run's newest RunRetried, and whether there is one.
func retriedFrom(t *testing.T, env *testenv.Env, id string) (string, bool) {
	t.Helper()
	for _, e := range slices.Backward(env.History(id)) {
		if e.Kind == history.KindRunRetried {
			p, err := e.Decode()
			if err != nil {
				t.Fatal(err)
			}
			return p.(history.RunRetried).FromStep, true
		}
	}
	return "", false
}

// The retry-from-step choices carry each step's exact name as their value (without one, a
// browser posts the option's text with its whitespace stripped and collapsed, so " load"
// retried from "load"), label the names whitespace would hide, and leave out a name a form
// cannot post as it is (a line break is posted as CRLF), saying so.
func TestRetryFromStepOptions(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	id := formsRun(t, env)
	b := newBrowser(t, serve(t, env, ""))
	st, page := b.get("/_x/runs/" + id)
	want(t, "run page", st, page, http.StatusOK, `<option value="load">load</option>`,
		`<option value=" load">&#34; load&#34;</option>`, `<option value="a  b">&#34;a  b&#34;</option>`, `id="unpostable"`)
	if strings.Contains(page, `<option value="x`) {
		t.Error("a step whose name holds a line break is offered, and would be posted as another name")
	}
}

// In Chromium: each retry-from-step option posts its own step's name, and retrying from
// " load" through the confirmation retries from " load"; a schedule's forms post to that
// schedule's own routes, and its Pause, confirmed, pauses it and cancels nothing.
func TestBrowserFormsPostWhatTheyShow(t *testing.T) {
	exe := chromium()
	if exe == "" {
		t.Skip("no Chromium: install Debian's chromium (apt-get install -y chromium) or set JOBS_CHROMIUM")
	}
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ctx := context.Background()
	id := formsRun(t, env)
	victim, err := env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "import", Queue: "manual", Key: "victim", NoTenant: true})
	if err != nil {
		t.Fatal(err)
	}
	evil := "x/../../runs/" + victim.RunID + "/cancel?"
	names := []string{evil, "team/nightly", "team%2Fnightly", "a#b"}
	sc := declareSchedules(t, env, names...)
	base := serveOps(t, env, sc, "")

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	bctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	tctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
	defer cancelTimeout()

	if err := chromedp.Do(tctx,
		chromedp.Navigate(base+"/_x/runs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#fromStep`)),
	); err != nil {
		t.Fatal(err)
	}
	// What the form would post for each option in turn, as the browser builds it.
	posted, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`(() => {
		const s = document.querySelector("#fromStep"), out = [];
		for (let i = 0; i < s.options.length; i++) { s.selectedIndex = i; out.push(new FormData(s.form).get("fromStep")); }
		s.selectedIndex = 0;
		return out; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if want := formSteps[:3]; !slices.Equal(posted, want) {
		t.Errorf("the options post %q, want %q", posted, want)
	}
	if err := chromedp.Do(tctx,
		chromedp.SetValue(chromedp.CSS(`#fromStep`), " load"),
		chromedp.Click(chromedp.CSS(`#retry-from`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
		chromedp.Click(chromedp.CSS(`#confirm-yes`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice, .error`)),
	); err != nil {
		t.Fatal(err)
	}
	if from, ok := retriedFrom(t, env, id); !ok || from != " load" {
		t.Errorf("choosing step %q and confirming retried from %q (retried: %v)", " load", from, ok)
	}

	// The schedules' forms, as the browser resolves their actions.
	if err := chromedp.Do(tctx,
		chromedp.Navigate(base+"/_x/schedules"),
		chromedp.WaitVisible(chromedp.CSS(`.act-pause`)),
	); err != nil {
		t.Fatal(err)
	}
	actions, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#schedules tr[data-schedule]")].flatMap(
		tr => [...tr.querySelectorAll("form")].map(f => tr.dataset.schedule + "\n" + new URL(f.action).pathname))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) != 2*len(names) {
		t.Fatalf("the schedules page has forms %q, want a Pause and a Trigger for each of %q", actions, names)
	}
	for _, a := range actions {
		name, path, _ := strings.Cut(a, "\n")
		if !strings.HasPrefix(path, "/_x/schedules/"+url.PathEscape(name)+"/") {
			t.Errorf("a form of schedule %q posts to %s", name, path)
		}
	}
	// Confirm Pause on the evil schedule (the first row: names sort).
	if err := chromedp.Do(tctx,
		chromedp.Click(chromedp.CSS(`tr[data-schedule^="x/"] .act-pause`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
		chromedp.Click(chromedp.CSS(`#confirm-yes`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice, .error`)),
	); err != nil {
		t.Fatal(err)
	}
	if !paused(t, sc, evil) {
		t.Errorf("confirming Pause on schedule %q did not pause it", evil)
	}
	for _, n := range names[1:] {
		if paused(t, sc, n) {
			t.Errorf("confirming Pause on schedule %q paused %q", evil, n)
		}
	}
	if run, err := env.Engine.GetRun(ctx, victim.RunID); err != nil {
		t.Fatal(err)
	} else if run.State == store.StateCancelled {
		t.Errorf("confirming Pause on schedule %q cancelled run %s", evil, victim.RunID)
	}
}
