package wrap

import (
	"context"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
)

// Publisher returns p with set applied to every published payload: hand it to jobs.PublishTo
// where the application publishes. The payload is stored encoded, and the runs that receive it
// open it on their worker (Frontend opens EventReceived payloads). The engine matches waits only
// on the match fields, which travel and are stored in the clear: a publish without them is
// refused here (the engine, which cannot read an encoded payload, would refuse it too).
func Publisher(p jobs.EventPublisher, set *codec.Set) jobs.EventPublisher { return publisher{p, set} }

type publisher struct {
	jobs.EventPublisher
	set *codec.Set
}

func (q publisher) PublishMatched(ctx context.Context, req jobs.PublishRequest) (jobs.Published, error) {
	if req.Match == nil {
		return jobs.Published{}, jobs.Errorf(jobs.CodeBadRequest,
			"event %q: an encoded payload is matched only on the match fields given beside it; give them (an empty map for none)", req.Event)
	}
	if len(req.Payload) > 0 {
		b, err := q.set.Encode(req.Payload)
		if err != nil {
			return jobs.Published{}, jobs.Wrap(jobs.CodeEncoding, err, "encode the payload of event %q", req.Event)
		}
		req.Payload = b
	}
	return q.EventPublisher.PublishMatched(ctx, req)
}
