package jobs

// Lookback says which events published before a WaitForEvent was reached may satisfy it at once.
//
// The engine keeps every published event for its lookback window (engine.Config.Lookback,
// default 5 minutes) so that a wait registered just after the publish it waits for is not
// missed. The window is per event name and match, not per run: an event published for one run
// (or for nobody) can satisfy a later run's wait on the same name and fields while it is in the
// window, once per run. A key such as "orgId=acme" that a second run of the same job reuses
// therefore sees the first run's event. Bound the lookback when that is wrong.
type Lookback string

const (
	// LookbackWindow (the default) takes any matching event of the engine's lookback window not
	// yet delivered to this run, including events published before the run existed.
	LookbackWindow Lookback = ""
	// LookbackSinceRunStart takes only events published at or after the run was created (and
	// within the window): events meant for an earlier run on the same key are ignored.
	LookbackSinceRunStart Lookback = "since-run-start"
	// LookbackNone takes no event published before the wait was registered: only a publish
	// after it wakes the run.
	LookbackNone Lookback = "none"
)

// Valid reports whether l is one of the defined modes.
func (l Lookback) Valid() bool {
	return l == LookbackWindow || l == LookbackSinceRunStart || l == LookbackNone
}

// WaitOption tunes one WaitForEvent call.
type WaitOption func(*WaitOptions)

// WaitOptions are the settings WaitOptions build; runtimes read them.
type WaitOptions struct {
	Lookback Lookback
}

// WithLookback bounds which earlier events the wait may take (see Lookback).
func WithLookback(l Lookback) WaitOption { return func(o *WaitOptions) { o.Lookback = l } }
