package engine

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/store"
)

// Why claims are handed back. The engine hands back over the fleet caps; a worker hands back over
// its own LimitConfig and says why in the release command (Code: the reason, Error: the detail).
// Only these reasons become metric labels, so a worker cannot grow the series without bound.
const (
	handBackJobCap     = "job_cap"
	handBackUndeclared = "undeclared"
	handBackOther      = "other"
)

var workerHandBackReasons = map[string]bool{"tenant_cap": true, "tenant_rate": true, "global_cap": true}

// handBackNotes remembers, per run, why its last claim was handed back, so `jobs show` can say
// why a delayed run waits. It is this engine process's memory, a best-effort explanation: another
// engine sharing the store, or this one after a restart, shows no note for a run it did not
// hand back itself. A claim forgets the note.
type handBackNotes interface {
	Add(runID, note string) bool
	Get(runID string) (string, bool)
	Remove(runID string) bool
}

func newHandBackMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: jobs.MetricClaimsHandedBack,
		Help: jobs.MetricClaimsHandedBackHelp, ConstLabels: engineSource}, []string{"queue", "reason"})
}

// handedBack counts a hand-back and notes why.
func (e *Engine) handedBack(r store.Run, reason, note string) {
	e.metrics.handedBack.WithLabelValues(r.Queue, reason).Inc()
	e.notes.Add(r.ID, reason+": "+note)
}

// releasedByWorker notes a worker's release over its own limits.
func (e *Engine) releasedByWorker(runID, queue string, c frontend.Command) {
	reason := c.Code
	if reason == "" {
		return // an unknown job handed back, or an older worker: nothing to say
	}
	if !workerHandBackReasons[reason] {
		reason = handBackOther
	}
	note := c.Error
	if len(note) > 200 {
		note = note[:200]
	}
	e.metrics.handedBack.WithLabelValues(queue, reason).Inc()
	e.notes.Add(runID, reason+": "+note)
}

// handBackNote is the note of a delayed run, "" when there is none.
func (e *Engine) handBackNote(r store.Run) string {
	if r.State != store.StateDelayed {
		return ""
	}
	n, _ := e.notes.Get(r.ID)
	return n
}

func jobCapNote(job string, limit int) string {
	// Said of the moment of the hand-back, read later: by then the runs that held the cap may
	// have finished, and the run waits for its retry of the claim.
	return fmt.Sprintf("job %q was at its fleet concurrency cap (%d running, jobs.Concurrency) when this run was last claimed; it is tried again shortly", job, limit)
}
