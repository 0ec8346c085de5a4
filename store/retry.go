package store

import "github.com/ultimat3/jobs"

// RetriedAttempt is the attempt a run reopened by an operator's retry (RunRetry) is on. The count
// goes on rather than restarting at 1, so the failures listed for a run keep distinct numbers
// and the first failure after a retry is not mistaken for the run's first one:
//   - a failed run spent its attempt, so the next pass is the next attempt. A terminal stop at
//     attempt 1 of 5 resumes with attempts 2..5 unspent; a run whose attempts were exhausted
//     gets one more attempt per retry (the policy already said no; the operator overrides it
//     once, not five times);
//   - a blocked run did not fail an attempt (its code no longer replays its history), so the
//     attempt it was on carries on after the fix is deployed.
func RetriedAttempt(r Run) int {
	if r.State == StateFailed {
		return r.Attempt + 1
	}
	return max(r.Attempt, 1)
}

// RetryKeyHeld is the one wording of a retry refused because a live run of the run's own tenant
// took its idempotency key (Run.LiveKey) meanwhile, shared by every backend; another tenant's live
// run under the same (Job, Key) does not hold it. It names no run but the one retried.
func RetryKeyHeld(runID string) error {
	return jobs.Errorf(jobs.CodeJobNotRetryable, "run %s: its idempotency key is held by a live run", runID)
}

// StaleRetry is the one wording of RetryParams.ExpectLastSeq's refusal, shared by every backend:
// nil when p.ExpectLastSeq is 0 or run.LastSeq, else X_HISTORY_STALE (the history the retry was
// built on, its FromSeq found in it, is no longer the run's).
func StaleRetry(run Run, p RetryParams) error {
	if p.ExpectLastSeq > 0 && run.LastSeq != p.ExpectLastSeq {
		return jobs.Errorf(jobs.CodeHistoryStale, "run %s: the retry was built on seq %d, the run's history is at seq %d",
			p.RunID, p.ExpectLastSeq, run.LastSeq)
	}
	return nil
}
