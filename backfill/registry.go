package backfill

import (
	"context"
	"sort"
	"sync"

	"github.com/ultimat3/jobs"
)

// Declarer is implemented by every backfill: how a registry of jobs tells its backfills from its
// other jobs.
type Declarer interface {
	jobs.Definition
	Declaration() Declaration
}

var registry struct {
	sync.Mutex
	byName map[string]Declarer
}

// register stamps a defined backfill into the process's registry. Define does it: an app
// registers nothing, because a declaration that had to be registered a second time would be one
// half the apps forget.
func register(d Declarer) {
	registry.Lock()
	defer registry.Unlock()
	if registry.byName == nil {
		registry.byName = map[string]Declarer{}
	}
	// The newest definition of a name wins: a process defines each backfill once, at package
	// level; tests that define one name again mean the newer one.
	registry.byName[d.Declaration().Name] = d
}

// Declared is Registered as engine.Config.Backfills takes it: an app that embeds the engine
// passes backfill.Declared, so the engine knows the backfills it defined that never ran.
func Declared(context.Context) ([]Declaration, error) { return Registered(), nil }

// Registered returns the declarations of every backfill this process defined, by name.
func Registered() []Declaration {
	registry.Lock()
	defer registry.Unlock()
	out := make([]Declaration, 0, len(registry.byName))
	for _, d := range registry.byName {
		out = append(out, d.Declaration())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Is reports whether a job definition is a backfill (a plain job, or a look-alike, is not).
func Is(def jobs.Definition) bool {
	_, ok := def.(Declarer)
	return ok
}

// InRegistry returns the declarations of the backfills a worker's registry hosts: what the worker
// declares to the engine.
func InRegistry(reg *jobs.Registry) []Declaration {
	var out []Declaration
	for _, def := range reg.All() {
		if d, ok := def.(Declarer); ok {
			out = append(out, d.Declaration())
		}
	}
	return out
}
