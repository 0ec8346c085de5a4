package ui

import (
	"net/http"
	"net/url"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/scheduler"
)

// The operators' pages beyond runs: backfills, schedules, and the fleet's manifest. Like the
// others, each loader hands a template one engine projection (the scheduler's, for schedules)
// and computes nothing of its own.

// notices are the messages an action's redirect asks the next page to show, by key: a page
// never echoes text from its URL.
var notices = map[string]string{
	"cancelled": "Done: run cancelled. The history below records it.",
	"retried":   "Done: run retried. The history below records it.",
	"paused":    "Done: the schedule is paused. It fires nothing until resumed.",
	"resumed":   "Done: the schedule is resumed. It fires from its next occurrence; the paused ones are skipped.",
	"triggered": "Done: the schedule fired now. This is its run, recorded as manual.",
}

// backfillsView is the backfills page: the engine's board, and the passes running now.
type backfillsView struct {
	Board engine.BackfillBoard
	// Env echoes the environment asked for (?env=).
	Env     string
	Running []engine.BackfillPass
}

func backfillsData(r *Request) (any, error) {
	env := r.URL.Query().Get("env")
	board, err := r.Engine.InspectBackfillBoard(r.Context(), env)
	if err != nil {
		return nil, err
	}
	v := &backfillsView{Board: board, Env: env}
	for _, p := range board.Passes {
		if p.Status == backfill.StatusRunning {
			v.Running = append(v.Running, p)
		}
	}
	return v, nil
}

// schedulesView is the schedules page. Off: the engine runs no scheduler.
type schedulesView struct {
	Off       bool
	Schedules []scheduler.Info
	// Node is this engine's scheduler id, and Leading whether it holds the scheduler's lease.
	Node    string
	Leading bool
}

func schedulesData(r *Request) (any, error) {
	if r.Scheduler == nil {
		return &schedulesView{Off: true}, nil
	}
	all, err := r.Scheduler.Inspect(r.Context())
	if err != nil {
		return nil, err
	}
	return &schedulesView{Schedules: all, Node: r.Scheduler.ID(), Leading: r.Scheduler.Leading()}, nil
}

// manifestView is the manifest page: the engine's manifest projection, and its tallies.
type manifestView struct {
	engine.ManifestView
	Live, Stale, InFlight, Conflicts int
}

func manifestData(r *Request) (any, error) {
	m, err := r.Engine.InspectManifest(r.Context())
	if err != nil {
		return nil, err
	}
	v := &manifestView{ManifestView: m}
	for _, w := range m.Workers {
		if w.Live {
			v.Live++
		} else {
			v.Stale++
		}
		v.InFlight += w.InFlight
	}
	for _, d := range m.Declarations {
		if d.Conflict {
			v.Conflicts++
		}
	}
	return v, nil
}

// scheduleAction pauses, resumes or triggers a schedule, then shows the schedules page (or, for
// a trigger, the run it made).
func (u *UI) scheduleAction(w http.ResponseWriter, r *http.Request, me who) error {
	name, verb := r.PathValue("name"), r.PathValue("verb")
	if err := jobs.ValidIdentifier("schedule name", name); err != nil {
		return err
	}
	if u.sched == nil {
		return jobs.Errorf(jobs.CodeNoScheduler, "this engine runs no scheduler")
	}
	back := u.prefix + "/schedules?notice="
	switch verb {
	case "pause":
		if _, err := u.sched.Pause(r.Context(), name); err != nil {
			return err
		}
		back += "paused"
	case "resume":
		if _, err := u.sched.Resume(r.Context(), name); err != nil {
			return err
		}
		back += "resumed"
	case "trigger":
		res, err := u.sched.Trigger(r.Context(), name)
		if err != nil {
			return err
		}
		back = u.prefix + "/runs/" + url.PathEscape(res.RunID) + "?notice=triggered"
	default:
		return jobs.Errorf(jobs.CodeBadRequest, "no schedule action %q: want pause, resume or trigger", verb)
	}
	u.log.Info("jobs.ui.schedule", "schedule", name, "action", verb, "by", actor(me))
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}
