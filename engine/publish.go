package engine

import (
	"context"

	"github.com/ultimat3/jobs"
)

var _ jobs.EventPublisher = (*Engine)(nil)

// PublishMatched publishes an event with its match fields given beside the payload (see
// jobs.PublishRequest): with Match set the engine never reads the payload, so it may be encoded
// by the application's codec.
func (e *Engine) PublishMatched(ctx context.Context, req jobs.PublishRequest) (jobs.Published, error) {
	return e.signals.PublishMatched(ctx, "", req.Event, req.Payload, req.Match)
}
