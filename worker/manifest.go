package worker

import (
	"context"
	"sort"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

// The worker's manifest: what it hosts, sent before its first poll, again every interval the
// engine asks for, and at once when the engine says it does not know the worker (a poll refused
// with X_QUEUE_UNDECLARED: the engine's store was replaced, or the worker's first send failed).

// defaultResend is the resend interval until the engine names one.
const defaultResend = time.Minute

// manifest builds the worker's manifest from its registry and the queues it polls.
func (w *Worker) manifest() (frontend.Manifest, error) {
	decls, err := w.cfg.Registry.Manifest()
	if err != nil {
		return frontend.Manifest{}, err
	}
	m := frontend.Manifest{WorkerID: w.cfg.ID, Declarations: decls}
	for q := range w.cfg.Queues {
		m.Queues = append(m.Queues, q)
	}
	sort.Strings(m.Queues)
	return m, nil
}

// declare sends the manifest once and returns the engine's resend interval.
func (w *Worker) declare(ctx context.Context) (time.Duration, error) {
	m, err := w.manifest()
	if err != nil {
		return 0, err
	}
	resp, err := w.cfg.Frontend.DeclareManifest(ctx, m)
	if err != nil {
		return 0, err
	}
	switch {
	case resp.Resend <= 0:
		resp.Resend = defaultResend
	case resp.Resend < frontend.MinResend:
		// Below the protocol's floor (a bug, or not our engine): resending at the engine's word
		// would spin this loop against it.
		resp.Resend = frontend.MinResend
	}
	return resp.Resend, nil
}

// manifestLoop resends the manifest every interval, and when kicked.
func (w *Worker) manifestLoop(every time.Duration) {
	defer w.background.Done()
	for {
		if every <= 0 {
			every = defaultResend
		}
		tm := w.clock.NewTimer(every)
		select {
		case <-w.hbStop:
			tm.Stop()
			return
		case <-w.manifestKick:
			tm.Stop()
		case <-tm.C():
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		next, err := w.declare(ctx)
		cancel()
		if err != nil {
			w.log.Warn("jobs.manifest.failed", "err", err)
			every = min(every, 5*time.Second) // try again soon
			continue
		}
		every = next
	}
}

// declaring is the worker's view of the engine: a poll refused because the engine does not
// know the worker's queues resends the manifest at once.
type declaring struct {
	frontend.Frontend
	w *Worker
}

func (d *declaring) Poll(ctx context.Context, req frontend.PollRequest) ([]frontend.Task, error) {
	tasks, err := d.Frontend.Poll(ctx, req)
	if jobs.HasCode(err, jobs.CodeQueueUndeclared) {
		select {
		case d.w.manifestKick <- struct{}{}:
		default:
		}
	}
	return tasks, err
}

// startManifest sends the first manifest. A refusal (a declaration the engine will not hold,
// such as a concurrency cap its store cannot enforce) fails Start; an engine that cannot be
// reached yet is retried in the background, and the pollers wait for it.
func (w *Worker) startManifest(ctx context.Context) error {
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	every, err := w.declare(callCtx)
	cancel()
	if err != nil {
		switch jobs.ClassOf(jobs.CodeOf(err)) {
		case jobs.Terminal:
			return err
		}
		w.log.Warn("jobs.manifest.failed", "err", err)
		every = time.Second
	}
	w.background.Add(1)
	go w.manifestLoop(every)
	return nil
}
