package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ultimat3/jobs"
)

// ManifestView is the fleet's manifest as operators see it: the JSON API (GET /v1/manifest) and
// the CLI (jobs manifest --json) render this one projection.
type ManifestView struct {
	Workers      []WorkerView      `json:"workers"`
	Declarations []DeclarationView `json:"declarations"`
}

// WorkerView is a worker that sent a manifest.
type WorkerView struct {
	ID       string    `json:"id"`
	Queues   []string  `json:"queues"`
	LastSeen time.Time `json:"lastSeen"`
	// Live is true while the worker resends its manifest: it was seen within three resend
	// intervals.
	Live bool `json:"live"`
	// InFlight counts the runs the worker holds now (running under its lease).
	InFlight int `json:"inFlight"`
}

// DeclarationView is one declaration (a kind, a name and a checksum of its data) with the
// workers whose current manifest holds it.
type DeclarationView struct {
	Kind      string          `json:"kind"`
	Name      string          `json:"name"`
	Checksum  string          `json:"checksum"`
	Data      json.RawMessage `json:"data,omitempty"`
	FirstSeen time.Time       `json:"firstSeen"`
	LastSeen  time.Time       `json:"lastSeen"`
	// Live is true when a live worker declares it.
	Live    bool             `json:"live"`
	Workers []DeclaredByView `json:"workers"`
	// Conflict is true when current workers declare this kind and name with another checksum
	// too: two builds disagree on it.
	Conflict bool `json:"conflict,omitempty"`
}

// DeclaredByView is one worker declaring a declaration.
type DeclaredByView struct {
	WorkerID string    `json:"workerId"`
	LastSeen time.Time `json:"lastSeen"`
	Live     bool      `json:"live"`
}

// InspectManifest returns every declaration of the fleet and every worker that sent a manifest.
func (e *Engine) InspectManifest(ctx context.Context) (ManifestView, error) {
	v, err := e.manifestView(ctx, "")
	if err != nil {
		return v, err
	}
	return v, e.annotateFleet(ctx, &v)
}

// Declarations returns the fleet's declarations of one kind (jobs.DeclareJob,
// jobs.DeclareBackfill, jobs.DeclareSchedule, …), for the parts of the engine that act on what
// workers declared: a scheduler reads the schedules, a backfill report the backfills. A
// declaration with Live false is one no live worker holds any more.
func (e *Engine) Declarations(ctx context.Context, kind string) ([]DeclarationView, error) {
	if kind == "" {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "Declarations needs a kind")
	}
	v, err := e.manifestView(ctx, kind)
	return v.Declarations, err
}

func (e *Engine) manifestView(ctx context.Context, kind string) (ManifestView, error) {
	decls, workers, err := e.store.ManifestRead(ctx, kind)
	if err != nil {
		return ManifestView{}, err
	}
	now := e.clock.Now()
	v := ManifestView{Workers: make([]WorkerView, 0, len(workers)), Declarations: make([]DeclarationView, 0, len(decls))}
	live := map[string]bool{}
	for _, w := range workers {
		l := e.live(w.LastSeen, now)
		live[w.ID] = l
		qs := w.Queues
		if qs == nil {
			qs = []string{}
		}
		v.Workers = append(v.Workers, WorkerView{ID: w.ID, Queues: qs, LastSeen: w.LastSeen, Live: l})
	}
	for _, d := range decls {
		dv := DeclarationView{Kind: d.Kind, Name: d.Name, Checksum: d.Checksum, FirstSeen: d.FirstSeen, LastSeen: d.LastSeen,
			Workers: make([]DeclaredByView, 0, len(d.Workers))}
		if len(d.Data) > 0 {
			dv.Data = json.RawMessage(d.Data)
		}
		for _, by := range d.Workers {
			l := live[by.WorkerID] && e.live(by.LastSeen, now)
			dv.Live = dv.Live || l
			dv.Workers = append(dv.Workers, DeclaredByView{WorkerID: by.WorkerID, LastSeen: by.LastSeen, Live: l})
		}
		v.Declarations = append(v.Declarations, dv)
	}
	markConflicts(v.Declarations)
	return v, nil
}
