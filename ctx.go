package jobs

import (
	"context"
	"time"
)

// Ctx is what a job body runs under. It is a context.Context, cancelled when the run is
// cancelled, its attempt times out or its lease is lost, so it can be handed to anything that
// takes one. It also carries the run's identity and actor, and the durable calls (Step, Sleep,
// WaitForEvent) take it.
type Ctx struct {
	context.Context
	info RunInfo
	rt   Runtime
}

// RunInfo identifies the run a body executes.
type RunInfo struct {
	RunID   string
	Job     string
	Queue   string
	Attempt int
	Actor   Actor
}

// Actor is who a run acts as. Tenant is the tenant the job declared for this input (TenantFrom);
// a job declared NoTenant carries none. EnqueuedBy is attribution, never authority: a body runs
// with system authority, because the enqueuer's role may have changed by the time a three-day
// sleep ends.
type Actor struct {
	Tenant     string
	EnqueuedBy string
}

// HasTenant reports whether the run acts under a tenant.
func (a Actor) HasTenant() bool { return a.Tenant != "" }

type actorKey struct{}

// ActorFrom returns the actor of the run whose context ctx derives from (a body's Ctx, or the
// context a step's function receives), so tenant-scoped code deep in a call stack can check it.
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// Runtime carries out durable calls for a Ctx. The worker's replay runtime implements it; job
// code never calls it directly.
type Runtime interface {
	// Step returns the recorded output of the step named name, or runs fn and records its output.
	Step(c *Ctx, name string, fn func(context.Context) ([]byte, error)) ([]byte, error)
	// Sleep suspends the run until d from the moment it was first reached.
	Sleep(c *Ctx, name string, d time.Duration) error
	// WaitForEvent suspends the run until a matching event or the timeout; received is false on
	// timeout. opts.Lookback bounds which earlier events may satisfy it.
	WaitForEvent(c *Ctx, name, event string, match map[string]any, timeout time.Duration, opts WaitOptions) (payload []byte, received bool, err error)
}

// NewCtx builds the Ctx a body runs under. It is for runtimes (the worker, replay.Check), not for
// job code.
func NewCtx(parent context.Context, info RunInfo, rt Runtime) *Ctx {
	return &Ctx{Context: context.WithValue(parent, actorKey{}, info.Actor), info: info, rt: rt}
}

// runtime returns the Ctx's runtime, or an error naming the call when there is none: a durable
// call outside a job body (a nil Ctx, or one made by hand rather than by the worker) would
// otherwise be a bare nil-pointer panic.
func (c *Ctx) runtime(kind, name string) (Runtime, error) {
	if c == nil || c.rt == nil {
		return nil, Errorf(CodeBadRequest, "%s %q was called outside a job body: durable calls take the *jobs.Ctx the worker hands the body", kind, name)
	}
	return c.rt, nil
}

// rtOf is the Ctx's runtime, or nil for a nil Ctx: the optional runtimes are asserted on it, and
// a nil one answers "this runtime cannot …" rather than a panic.
func rtOf(c *Ctx) Runtime {
	if c == nil {
		return nil
	}
	return c.rt
}

// Run returns the run's identity.
func (c *Ctx) Run() RunInfo { return c.info }

// Actor returns who the run acts as.
func (c *Ctx) Actor() Actor { return c.info.Actor }
