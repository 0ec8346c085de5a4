package store

import "github.com/ultimat3/jobs"

// StaleSeq is the one wording of Mutation.AfterSeq's refusal, shared by every backend: nil when
// m.AfterSeq is 0 or run.LastSeq, else X_HISTORY_STALE.
func StaleSeq(run Run, m Mutation) error {
	if m.AfterSeq > 0 && run.LastSeq != m.AfterSeq {
		return jobs.Errorf(jobs.CodeHistoryStale, "run %s: the write was built on seq %d, the run's history is at seq %d", m.RunID, m.AfterSeq, run.LastSeq)
	}
	return nil
}
