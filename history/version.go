package history

// VersionMarked records the version of a change point (jobs.Version) the run took the first
// time it reached it. Replay returns the recorded version, so a run that started under old code
// keeps the branch it took, whatever code replays it later.
type VersionMarked struct {
	ChangeID string `msgpack:"name"`
	Version  int    `msgpack:"version"`
}

func (VersionMarked) Kind() Kind     { return KindVersionMarked }
func (v VersionMarked) name() string { return v.ChangeID }
