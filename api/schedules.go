package api

import (
	"net/http"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/inputcheck"
	"github.com/ultimat3/jobs/scheduler"
)

// The scheduler's admin routes (JSON):
//
//	GET  /v1/schedules                 every declared schedule (ScheduleList)
//	GET  /v1/schedules/{name}          one (scheduler.Info)
//	POST /v1/schedules/{name}/pause    pause it (scheduler.Info)
//	POST /v1/schedules/{name}/resume   resume it from its next occurrence (scheduler.Info)
//	POST /v1/schedules/{name}/trigger  fire it now, recorded as manual (jobs.EnqueueResult, 201)
//
// An engine serving without a scheduler answers them X_NO_SCHEDULER (404).

// ScheduleList is the answer of GET /v1/schedules.
type ScheduleList struct {
	Schedules []scheduler.Info `json:"schedules"`
}

// sched returns the server's scheduler, or X_NO_SCHEDULER.
func (s *Server) sched() (*scheduler.Scheduler, error) {
	if s.cfg.Scheduler == nil {
		return nil, jobs.Errorf(jobs.CodeNoScheduler, "this engine runs no scheduler")
	}
	return s.cfg.Scheduler, nil
}

// scheduleName reads and checks a schedule's name from the path.
func scheduleName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	return name, inputcheck.ScheduleName(name) // client.Local's rule, and api.Client's before it sends
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	sc, err := s.sched()
	if err != nil {
		return err
	}
	all, err := sc.Inspect(r.Context())
	if err != nil {
		return err
	}
	if all == nil {
		all = []scheduler.Info{}
	}
	writeJSON(w, http.StatusOK, ScheduleList{Schedules: all})
	return nil
}

// scheduleRoute adapts a call on one named schedule.
func (s *Server) scheduleRoute(call func(sc *scheduler.Scheduler, r *http.Request, name string) (any, int, error)) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		sc, err := s.sched()
		if err != nil {
			return err
		}
		name, err := scheduleName(r)
		if err != nil {
			return err
		}
		out, status, err := call(sc, r, name)
		if err != nil {
			return err
		}
		writeJSON(w, status, out)
		return nil
	}
}

func (s *Server) getSchedule() handler {
	return s.scheduleRoute(func(sc *scheduler.Scheduler, r *http.Request, name string) (any, int, error) {
		in, err := sc.Get(r.Context(), name)
		return in, http.StatusOK, err
	})
}

func (s *Server) pauseSchedule() handler {
	return s.scheduleRoute(func(sc *scheduler.Scheduler, r *http.Request, name string) (any, int, error) {
		in, err := sc.Pause(r.Context(), name)
		return in, http.StatusOK, err
	})
}

func (s *Server) resumeSchedule() handler {
	return s.scheduleRoute(func(sc *scheduler.Scheduler, r *http.Request, name string) (any, int, error) {
		in, err := sc.Resume(r.Context(), name)
		return in, http.StatusOK, err
	})
}

func (s *Server) triggerSchedule() handler {
	return s.scheduleRoute(func(sc *scheduler.Scheduler, r *http.Request, name string) (any, int, error) {
		res, err := sc.Trigger(r.Context(), name)
		return res, http.StatusCreated, err
	})
}
