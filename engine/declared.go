package engine

import (
	"context"
	"encoding/json"
)

// Declared decodes the declarations of one kind the fleet's manifests hold into T (the kind's
// own plain-data type: a schedule, a backfill), one per name. When workers disagree on a name (a
// rolling deploy), a declaration a live worker holds wins over one only a gone worker held, and
// then the most recently seen. A declaration whose data does not decode into T is left out: the
// worker validated it at Define, so it can only be a newer shape this engine does not read.
func Declared[T any](ctx context.Context, e *Engine, kind string) ([]T, error) {
	views, err := e.Declarations(ctx, kind)
	if err != nil {
		return nil, err
	}
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
	return out, nil
}
