package jobs

// Effects carries out the durable calls that act beyond the run: publishing an event and
// enqueueing another job. The worker's replay runtime implements it; job code calls Publish and
// Job.EnqueueFrom.
type Effects interface {
	// Publish returns the recorded event id of the call named name, or publishes and records.
	Publish(c *Ctx, name, event string, payload []byte) (eventID string, err error)
	// Enqueue returns the recorded run id of the call named name, or enqueues and records.
	Enqueue(c *Ctx, name string, req EnqueueRequest) (runID string, err error)
}

func effects(c *Ctx, call string) (Effects, error) {
	fx, ok := rtOf(c).(Effects)
	if !ok {
		return nil, Errorf(CodeInvariant, "%s: this runtime cannot act beyond the run", call)
	}
	return fx, nil
}

// Publish publishes an event from inside a run, as a durable call named "publish:<event>": it
// happens once per run, however often the run is retried or replayed, and is recorded in the
// run's history. Runs waiting for event receive it as they would a Client's publish. It returns
// the event's id. To publish one event name twice in a run, name the calls with PublishAs.
func Publish(c *Ctx, event string, payload any) (string, error) {
	return PublishAs(c, "publish:"+event, event, payload)
}

// PublishAs is Publish with the durable call's name given.
func PublishAs(c *Ctx, name, event string, payload any) (string, error) {
	fx, err := effects(c, "publish "+name)
	if err != nil {
		return "", err
	}
	b, err := Encode(payload)
	if err != nil {
		return "", err
	}
	return fx.Publish(c, name, event, b)
}

// EnqueueFrom enqueues a run of the job from inside the run c, as a durable call named name: it
// is recorded in c's history, and a retried or replayed run gets the same child run back instead
// of enqueueing another (the engine creates the child under a dedupe id derived from the run and
// the call). Idempotency by the child's key applies as for any enqueue.
func (j *Job[In, Out]) EnqueueFrom(c *Ctx, name string, in In) (EnqueueResult, error) {
	fx, err := effects(c, "enqueue "+name)
	if err != nil {
		return EnqueueResult{}, err
	}
	req, err := j.Request(in)
	if err != nil {
		return EnqueueResult{}, err
	}
	id, err := fx.Enqueue(c, name, req)
	if err != nil {
		return EnqueueResult{}, err
	}
	return EnqueueResult{RunID: id}, nil
}
