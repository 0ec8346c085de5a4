package engine

import (
	"context"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

type createReq struct {
	p    store.CreateRunParams
	done chan createRes
}

type createRes struct {
	res store.CreateRunResult
	err error
}

// create enqueues through the create loop, so concurrent enqueues share one transaction: on a
// single-writer store (SQLite) each would otherwise pay its own fsync.
func (e *Engine) create(ctx context.Context, p store.CreateRunParams) (store.CreateRunResult, error) {
	e.handing.RLock()
	e.mu.Lock()
	started := e.started
	e.mu.Unlock()
	if !started {
		e.handing.RUnlock()
		// Not serving (a one-shot CLI use, or a test that never started it): write directly.
		res, err := e.store.RunCreate(ctx, []store.CreateRunParams{p})
		if err != nil {
			return store.CreateRunResult{}, err
		}
		return res[0], nil
	}
	r := &createReq{p: p, done: make(chan createRes, 1)}
	select {
	case e.creates <- r: // queued before Stop can end the loop, which answers what it queued
	case <-ctx.Done():
		e.handing.RUnlock()
		return store.CreateRunResult{}, ctx.Err()
	}
	e.handing.RUnlock()
	select {
	case out := <-r.done:
		return out.res, out.err
	case <-ctx.Done():
		return store.CreateRunResult{}, jobs.Wrap(jobs.CodeCommitUnknown, ctx.Err(), "enqueue of %q", p.Run.Job)
	}
}

func (e *Engine) createLoop(ctx context.Context) {
	batch := make([]*createReq, 0, e.cfg.MaxBatch)
	params := make([]store.CreateRunParams, 0, e.cfg.MaxBatch)
	for {
		batch, params = batch[:0], params[:0]
		select {
		case r := <-e.creates:
			batch = append(batch, r)
		case <-ctx.Done():
			for {
				select {
				case r := <-e.creates:
					r.done <- createRes{err: jobs.Errorf(jobs.CodeDraining, "the engine is stopping")}
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < e.cfg.MaxBatch {
			select {
			case r := <-e.creates:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		for _, r := range batch {
			params = append(params, r.p)
		}
		results, err := e.store.RunCreate(context.WithoutCancel(ctx), params)
		if err != nil && len(batch) > 1 {
			// One bad request must not fail its neighbours: fall back to one transaction each.
			for _, r := range batch {
				res, err := e.store.RunCreate(context.WithoutCancel(ctx), []store.CreateRunParams{r.p})
				if err != nil {
					r.done <- createRes{err: err}
					continue
				}
				r.done <- createRes{res: res[0]}
			}
			continue
		}
		for i, r := range batch {
			if err != nil {
				r.done <- createRes{err: err}
				continue
			}
			r.done <- createRes{res: results[i]}
		}
	}
}
