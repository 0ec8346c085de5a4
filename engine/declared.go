package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ultimat3/jobs"
)

// Declared decodes the declarations of one kind the fleet's manifests hold into T (the kind's
// own plain-data type: a schedule, a backfill), one per name. When workers disagree on a name (a
// rolling deploy), a declaration a live worker holds wins over one only a gone worker held, and
// then the most recently seen. A declaration whose data does not decode into T is left out: the
// worker validated it at Define, so it can only be a newer shape this engine does not read.
//
// Declared keeps what only gone workers declared: it is the record of what was ever declared.
// What the engine acts on by itself, such as the schedules it fires, reads DeclaredLive.
func Declared[T any](ctx context.Context, e *Engine, kind string) ([]T, error) {
	views, err := e.Declarations(ctx, kind)
	if err != nil {
		return nil, err
	}
	return decodeDeclared[T](e, kind, views), nil
}

// DeclaredLive is Declared narrowed to what the fleet declares now: only the declarations some
// live worker holds. Declarations are never deleted, and a stopped worker's are kept, so without
// this a schedule a deploy removed or renamed would keep firing for ever on the strength of the
// last worker of the old build.
//
// When no worker is live at all, it is the set the fleet held when it was last seen: the
// declarations held by the workers live as of the newest manifest any worker sent. A fleet
// restarting, or an engine that starts before its workers reconnect, must not drop every
// schedule meanwhile (a nightly job would silently skip a night); and taking that last set, not
// everything ever declared, keeps what an earlier deploy removed out of it.
func DeclaredLive[T any](ctx context.Context, e *Engine, kind string) ([]T, error) {
	if kind == "" {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "DeclaredLive needs a kind")
	}
	v, err := e.manifestView(ctx, kind)
	if err != nil {
		return nil, err
	}
	anyLive := false
	for _, w := range v.Workers {
		anyLive = anyLive || w.Live
	}
	if anyLive {
		live := make([]DeclarationView, 0, len(v.Declarations))
		for _, d := range v.Declarations {
			if d.Live {
				live = append(live, d)
			}
		}
		return decodeDeclared[T](e, kind, live), nil
	}
	// No live worker: liveness as of the newest manifest any worker sent, by the rule
	// manifestView applies at now (the worker and its link to the declaration both recent).
	var newest time.Time
	workerSeen := make(map[string]time.Time, len(v.Workers))
	for _, w := range v.Workers {
		workerSeen[w.ID] = w.LastSeen
		if w.LastSeen.After(newest) {
			newest = w.LastSeen
		}
	}
	last := make([]DeclarationView, 0, len(v.Declarations))
	for _, d := range v.Declarations {
		for _, by := range d.Workers {
			if seen, ok := workerSeen[by.WorkerID]; ok && e.live(seen, newest) && e.live(by.LastSeen, newest) {
				last = append(last, d)
				break
			}
		}
	}
	return decodeDeclared[T](e, kind, last), nil
}

// decodeDeclared picks one declaration per name among views (a live one over one only gone
// workers hold, then the most recently seen) and decodes it into T, in the order names first
// appear.
func decodeDeclared[T any](e *Engine, kind string, views []DeclarationView) []T {
	best := map[string]DeclarationView{}
	var order []string
	for _, v := range views {
		b, seen := best[v.Name]
		if !seen {
			order = append(order, v.Name)
		}
		if !seen || (v.Live && !b.Live) || (v.Live == b.Live && v.LastSeen.After(b.LastSeen)) {
			best[v.Name] = v
		}
	}
	out := make([]T, 0, len(order))
	for _, name := range order {
		var t T
		if err := json.Unmarshal(best[name].Data, &t); err != nil {
			e.log.Warn("jobs.manifest.undecodable", "kind", kind, "name", name, "err", err)
			continue
		}
		out = append(out, t)
	}
	return out
}
