package jobs

import "time"

// Priorities order runs within a queue (see EnqueueRequest.Priority). A level is a head start in
// the claim order rather than a lane of its own, so that a low-priority run cannot starve: it is
// never overtaken by a run that became ready more than (MaxPriority-MinPriority)×PriorityStep
// after it.
const (
	// PriorityStep is the head start one level of priority buys.
	PriorityStep = time.Minute
	// MinPriority and MaxPriority bound a run's priority; 0 is the default.
	MinPriority = -100
	MaxPriority = 100
)
