package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

// chromium finds the browser the browser tests drive: $JOBS_CHROMIUM, else Debian's chromium.
func chromium() string {
	if p := os.Getenv("JOBS_CHROMIUM"); p != "" {
		return p
	}
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// consoleErrors collects what a page reports as broken: console.error/warn calls, uncaught
// exceptions, and the browser's own error log (a failed load, a CSP violation).
type consoleErrors struct {
	mu   sync.Mutex
	errs []string
}

func (c *consoleErrors) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, s)
}

func (c *consoleErrors) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.errs
	c.errs = nil
	return out
}

// TestBrowser drives the console in a real headless Chromium over SQLite and Postgres data:
// log in, every page loads without a console error, and cancel, retry and retry-from-step work
// end to end through the confirmation dialog and land in the run's history. Screenshots go to
// $JOBS_SCREENSHOTS (or a temp dir) for review.
func TestBrowser(t *testing.T) {
	exe := chromium()
	if exe == "" {
		t.Skip("no Chromium: install Debian's chromium (apt-get install -y chromium; make test does) or set JOBS_CHROMIUM")
	}
	shots := os.Getenv("JOBS_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, b := range testenv.Backends() {
		if b.Name == "memory" {
			continue // the reference model; the browser tests are about real data
		}
		ran++
		t.Run(b.Name, func(t *testing.T) {
			env := testenv.Start(t, testenv.Options{Store: b.Open(t)})
			runs := seed(t, env)
			ops := seedOps(t, env)
			base := serveOps(t, env, ops.sched, "browser-token")
			driveConsole(t, exe, base, filepath.Join(shots, b.Name), env, runs, ops)
		})
	}
	if ran == 0 {
		t.Skip("no SQL backend to drive the console against")
	}
	t.Logf("screenshots in %s", shots)
}

func driveConsole(t *testing.T, exe, base, shots string, env *testenv.Env, runs seeded, ops opsSeeded) {
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()

	var console consoleErrors
	// The first Run starts the browser under the long-lived context; the timeout bounds the
	// test's actions only (a timeout on the first Run would stop the whole browser).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	// Subscribed before the first page loads; drained until the browser's context ends.
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				console.add(fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
			}
		}
	}()
	defer func() { cancelCtx(); <-done }()
	// Generous for a loaded machine (the whole suite runs beside it); about 20 s when idle.
	actx2, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	ctx = actx2
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		began := time.Now()
		defer func() { t.Logf("%s: %s", what, time.Since(began).Round(time.Millisecond)) }()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		// Let late console messages of this page arrive before judging it.
		_ = chromedp.Do(ctx, chromedp.Sleep(50*time.Millisecond))
		if errs := console.take(); len(errs) > 0 {
			t.Errorf("%s: the page reported errors:\n  %s", what, strings.Join(errs, "\n  "))
		}
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	var text string
	read := func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			text, err = chromedp.Text(chromedp.CSS(sel))(ctx, tg)
			return err
		})
	}

	step("log in",
		chromedp.Navigate(base+"/_x/login"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), "browser-token"),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`.tiles`)),
		read(`main`),
		shot("overview"),
	)
	for _, q := range []string{"orders", "manual"} {
		if !strings.Contains(text, q) {
			t.Errorf("overview: no queue %q in %q", q, text)
		}
	}

	failed, suspended, blocked, ready := runs[store.StateFailed], runs[store.StateSuspended], runs[store.StateBlocked], runs[store.StateReady]
	step("runs, filtered by state through the form",
		chromedp.Navigate(base+"/_x/runs"),
		chromedp.WaitVisible(chromedp.CSS(`table.runs`)),
		shot("runs"),
		chromedp.SetValue(chromedp.CSS(`select[name=state]`), "failed"),
		chromedp.Submit(chromedp.CSS(`select[name=state]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/_x/runs/`+failed+`"]`)),
		read(`table.runs tbody`),
	)
	if strings.Contains(text, ready) {
		t.Error("the state filter still lists a ready run")
	}
	step("dead letters",
		chromedp.Navigate(base+"/_x/dead-letters"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/_x/runs/`+failed+`"]`)),
		shot("dead-letters"),
	)

	// Retry from a chosen step, through the confirmation.
	step("retry from a step",
		chromedp.Navigate(base+"/_x/runs/"+failed),
		chromedp.WaitVisible(chromedp.CSS(`.timeline`)),
		shot("run-failed"),
		chromedp.SetValue(chromedp.CSS(`#fromStep`), "charge"),
		chromedp.Click(chromedp.CSS(`#retry-from`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
		shot("confirm"),
		chromedp.Click(chromedp.CSS(`#confirm-yes`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
	)
	wantRetried(t, env, failed, "charge")

	// "Keep it" in the dialog does nothing; "Confirm" cancels.
	step("cancel, declined",
		chromedp.Navigate(base+"/_x/runs/"+ready),
		chromedp.WaitVisible(chromedp.CSS(`#cancel`)),
		chromedp.Click(chromedp.CSS(`#cancel`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
		chromedp.Click(chromedp.CSS(`#confirm button[value=no]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)),
	)
	if r := env.Await(ready, store.StateReady); r.State != store.StateReady {
		t.Fatal("a declined confirmation cancelled the run")
	}
	step("cancel a suspended run",
		chromedp.Navigate(base+"/_x/runs/"+suspended),
		chromedp.WaitVisible(chromedp.CSS(`#cancel`)),
		chromedp.Click(chromedp.CSS(`#cancel`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
		chromedp.Click(chromedp.CSS(`#confirm-yes`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
		chromedp.WaitVisible(chromedp.CSS(`.timeline li.k-RunCancelled`)),
	)
	env.Await(suspended, store.StateCancelled)
	if ks := kinds(t, env, suspended); ks[len(ks)-1] != history.KindRunCancelled {
		t.Errorf("history of the cancelled run ends %v", ks)
	}

	step("retry a blocked run where it stopped",
		chromedp.Navigate(base+"/_x/runs/"+blocked),
		chromedp.WaitVisible(chromedp.CSS(`#retry`)),
		shot("run-blocked"),
		chromedp.Click(chromedp.CSS(`#retry`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-yes`)),
		chromedp.Click(chromedp.CSS(`#confirm-yes`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
	)
	wantRetried(t, env, blocked, "")

	driveOps(t, base, driver{step: step, shot: shot, read: read, text: &text}, env, ops)

	step("log out",
		chromedp.Navigate(base+"/_x/"),
		chromedp.WaitVisible(chromedp.CSS(`.tiles`)),
		chromedp.Click(chromedp.CSS(`header button.link`)),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
	)
}

func wantRetried(t *testing.T, env *testenv.Env, id, fromStep string) {
	t.Helper()
	for _, e := range slices.Backward(env.History(id)) {
		if e.Kind != history.KindRunRetried {
			continue
		}
		p, err := e.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if r := p.(history.RunRetried); r.FromStep != fromStep || r.By == "" {
			t.Errorf("RunRetried %+v, want fromStep %q and who", r, fromStep)
		}
		return
	}
	t.Errorf("run %s: no RunRetried in its history", id)
}
