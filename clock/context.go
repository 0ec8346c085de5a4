package clock

import "context"

type ctxKey struct{}

// NewContext returns ctx carrying c: the worker hands its clock to the code it runs this way, so
// job code that waits (a backfill's throttle) waits on the clock a test controls.
func NewContext(ctx context.Context, c Clock) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the clock ctx carries, or the wall clock.
func FromContext(ctx context.Context) Clock {
	if c, ok := ctx.Value(ctxKey{}).(Clock); ok {
		return c
	}
	return Real{}
}
