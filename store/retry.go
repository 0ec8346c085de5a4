package store

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
