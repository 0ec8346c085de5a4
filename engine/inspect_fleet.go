package engine

import (
	"context"

	"github.com/ultimat3/jobs/store"
)

// maxInFlightScan bounds the running runs read to count what each worker holds: far above the
// runs a fleet holds at once, and it keeps one manifest read's cost bounded.
const maxInFlightScan = 10_000

// annotateFleet adds to a manifest view how many runs each worker holds now. It is part of
// InspectManifest only: the scheduler and the backfill report read Declarations every round and
// do not need the scan of running runs it costs.
func (e *Engine) annotateFleet(ctx context.Context, v *ManifestView) error {
	held, err := e.inFlight(ctx)
	if err != nil {
		return err
	}
	for i := range v.Workers {
		v.Workers[i].InFlight = held[v.Workers[i].ID]
	}
	return nil
}

// inFlight counts the running runs by the worker that holds them. A run is in flight from its
// claim to its outcome, so a worker that died shows what it held until the lease lapses or its
// session is released.
func (e *Engine) inFlight(ctx context.Context) (map[string]int, error) {
	runs, err := e.store.RunList(ctx, store.ListParams{State: store.StateRunning, Limit: maxInFlightScan})
	if err != nil {
		return nil, err
	}
	held := map[string]int{}
	for _, r := range runs {
		if r.WorkerID != "" {
			held[r.WorkerID]++
		}
	}
	return held, nil
}

// markConflicts flags (for every reader of the manifest: it costs no read) the declarations of a kind and name that current workers (ones whose
// manifest still holds it) declare with different checksums: during a rolling deploy that is
// expected and passes; when it lasts, two builds disagree on what the job is.
func markConflicts(ds []DeclarationView) {
	type key struct{ kind, name string }
	held := map[key]int{}
	for _, d := range ds {
		if len(d.Workers) > 0 {
			held[key{d.Kind, d.Name}]++
		}
	}
	for i := range ds {
		d := &ds[i]
		d.Conflict = len(d.Workers) > 0 && held[key{d.Kind, d.Name}] > 1
	}
}
