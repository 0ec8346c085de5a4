package jobs

import (
	"context"
	"unicode"
)

// Acting is a job's enqueue on behalf of an actor: Job.As(actor).Enqueue(ctx, c, in). The run
// records who asked for it (EnqueuedBy, shown in run views, the CLI and the console, and handed
// to the body as Ctx.Actor().EnqueuedBy).
//
// Attribution, never authority. The body runs with the system's authority, not the actor's: a
// run that sleeps three days, or dead-letters and is retried next quarter, would otherwise act
// as someone whose role, membership or employment has changed since. A job that must act FOR a
// user takes that user's id in its input and re-authorises it in the body. For the same reason
// the actor never chooses the tenant: the job's declared tenant function does.
type Acting[In, Out any] struct {
	job   *Job[In, Out]
	actor Actor
}

// As returns the job's enqueue on behalf of actor. actor.EnqueuedBy is the actor's id (required:
// "user:42", "api-key:ci", "run:<id>"). actor.Tenant may be left empty; when set it must be the
// tenant the job derives from the input, so passing a body's own Ctx.Actor() to enqueue a job of
// the same tenant works, and an actor can never move a run to another tenant (X_ACTOR_INVALID).
func (j *Job[In, Out]) As(actor Actor) Acting[In, Out] {
	return Acting[In, Out]{job: j, actor: actor}
}

// Request builds the enqueue request for an input, attributed to the actor.
func (a Acting[In, Out]) Request(in In) (EnqueueRequest, error) {
	if a.actor.EnqueuedBy == "" {
		return EnqueueRequest{}, Errorf(CodeActorInvalid, "enqueue of %q as an actor names no actor id", a.job.name)
	}
	if err := ValidActor("actor id", a.actor.EnqueuedBy); err != nil {
		return EnqueueRequest{}, err
	}
	req, err := a.job.Request(in)
	if err != nil {
		return EnqueueRequest{}, err
	}
	if a.actor.Tenant != "" && a.actor.Tenant != req.Tenant {
		// Refused rather than ignored: a caller who passes a tenant believes it matters.
		return EnqueueRequest{}, Errorf(CodeActorInvalid,
			"enqueue of %q as %q: the actor's tenant %q is not the tenant %q the job derives from this input; an actor is attribution and never chooses the tenant",
			a.job.name, a.actor.EnqueuedBy, a.actor.Tenant, tenantName(req))
	}
	req.EnqueuedBy = a.actor.EnqueuedBy
	return req, nil
}

func tenantName(r EnqueueRequest) string {
	if r.NoTenant {
		return "(none)"
	}
	return r.Tenant
}

// Enqueue starts a run of the job attributed to the actor, or returns the live run holding the
// same idempotency key (which keeps its own attribution: the first enqueuer is the one recorded).
func (a Acting[In, Out]) Enqueue(ctx context.Context, c Enqueuer, in In) (EnqueueResult, error) {
	req, err := a.Request(in)
	if err != nil {
		return EnqueueResult{}, err
	}
	return c.Enqueue(ctx, req)
}

// ValidActor refuses an actor id no surface can show faithfully: ValidIdentifier's rules (UTF-8,
// no NUL, at most 1,000 bytes) and no control characters, because the id is printed on terminals
// and in the console, where a newline or an escape sequence would forge what an operator reads.
func ValidActor(field, v string) error {
	if err := ValidIdentifier(field, v); err != nil {
		return Errorf(CodeActorInvalid, "%s", err.(*Error).Message)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return Errorf(CodeActorInvalid, "%s holds the control character %U", field, r)
		}
	}
	return nil
}
