package worker

import (
	"sort"
	"strings"

	"github.com/ultimat3/jobs"
)

// Readiness: a worker is ready when it is started and every queue's last poll reached the engine.
// A load balancer has nothing to route to a worker, but an orchestrator holding a rollout until
// the new workers poll, or restarting one that cannot reach the engine, needs exactly that.

// pollResult records the outcome of a queue's last poll.
func (w *Worker) pollResult(queue string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pollErrs == nil {
		w.pollErrs = map[string]error{}
	}
	if err == nil {
		delete(w.pollErrs, queue)
	} else {
		w.pollErrs[queue] = err
	}
}

// Ready returns nil when the worker is started and no queue's last poll failed; otherwise an
// error that says why (X_DRAINING before Start and after Stop, X_ENGINE_UNREACHABLE naming the
// queues whose poll failed).
func (w *Worker) Ready() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		return jobs.Errorf(jobs.CodeDraining, "worker %s is not polling (not started, or draining)", w.cfg.ID)
	}
	select {
	case <-w.begun:
	default:
		// Pollers wait for the session to start, so no poll has failed yet: the engine has not
		// answered the worker at all.
		return jobs.Errorf(jobs.CodeEngineUnreachable, "worker %s has not reached the engine yet (starting its session)", w.cfg.ID)
	}
	if len(w.pollErrs) == 0 {
		return nil
	}
	var qs []string
	for q, err := range w.pollErrs {
		qs = append(qs, q+": "+err.Error())
	}
	sort.Strings(qs)
	return jobs.Errorf(jobs.CodeEngineUnreachable, "worker %s cannot poll the engine: %s", w.cfg.ID, strings.Join(qs, "; "))
}
