package jobs

// DefaultVersion is the version of a change point in a run that passed that point before the
// code had it: the original branch.
const DefaultVersion = 0

// Versioner is implemented by runtimes that record change points (the worker's replay runtime).
type Versioner interface {
	// Version returns the version of changeID the run took, recording max the first time a
	// live run reaches it.
	Version(c *Ctx, changeID string, min, max int) (int, error)
}

// Version is a change point: it lets code change under runs that are still in flight (a
// three-day sleep, a backfill) without breaking their replay. It returns which version of the
// code the run takes at this point:
//
//   - a run that reaches the point live (a new run, or an old one whose history ends before it)
//     records max in its history and gets max;
//   - a run whose history passed this point before the code had it gets DefaultVersion, so it
//     keeps replaying the branch it took;
//   - a run that recorded a version gets that version back, on every replay, under any later code.
//
// A version outside [min, max] means the code no longer carries the branch the run took: it is
// X_REPLAY_DIVERGED, and the run is blocked until a deploy that carries it again. Raise min once
// no run needs an old branch any more, and delete that branch. The same changeID may be asked
// again later in a run: it returns the same version.
//
//	v, err := jobs.Version(c, "charge-via-ledger", jobs.DefaultVersion, 1)
//	if v == jobs.DefaultVersion { /* the old code */ } else { /* the new code */ }
func Version(c *Ctx, changeID string, min, max int) (int, error) {
	if changeID == "" {
		return 0, Errorf(CodeBadRequest, "version: a change point needs an id")
	}
	if err := ValidIdentifier("change id", changeID); err != nil {
		return 0, err
	}
	if min < DefaultVersion || max < min {
		return 0, Errorf(CodeBadRequest, "version %q: [%d, %d] is not a range of versions from %d", changeID, min, max, DefaultVersion)
	}
	v, ok := rtOf(c).(Versioner)
	if !ok {
		return 0, Errorf(CodeInvariant, "version %q: this runtime does not record change points", changeID)
	}
	return v.Version(c, changeID, min, max)
}
