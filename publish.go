package jobs

import (
	"context"

	"github.com/ultimat3/jobs/history"
)

// PublishRequest publishes an event with the fields waits match on given beside its payload.
//
// The engine matches a wait against an event's match fields. Without Match they are the
// payload's own top-level fields, which the engine reads; with Match they are exactly the fields
// given, and the payload is only stored and delivered. That is what lets a payload be encoded by
// the application's codec (codec/wrap.Publisher): the engine cannot read an encoded payload, so
// one is refused without Match. The match fields are stored in the clear, in the published
// event's row, for as long as the lookback window keeps it: they must not be secret (an order id,
// not a card number).
type PublishRequest struct {
	// Event is the event's name.
	Event string `json:"event" msgpack:"event"`
	// Payload is the event's value, msgpack (Encode) or a codec envelope.
	Payload []byte `json:"payload" msgpack:"payload"`
	// Match holds the fields waits match on, top-level name → value, compared as a payload's
	// fields are (1, int64(1) and 1.0 are equal). Nil: the payload's own fields. An empty,
	// non-nil map: no fields (only a wait with no match receives the event).
	Match map[string]any `json:"match,omitempty" msgpack:"match"`
}

// Published is the outcome of a publish.
type Published struct {
	EventID string `json:"eventId" msgpack:"event_id"`
	// Delivered is how many waiting runs received it now; later waits may still receive it
	// within the lookback window.
	Delivered int `json:"delivered" msgpack:"delivered"`
}

// EventPublisher publishes events with their match fields: the in-process engine and the API
// client implement it, and codec/wrap.Publisher encodes the payloads on the way.
type EventPublisher interface {
	PublishMatched(ctx context.Context, req PublishRequest) (Published, error)
}

// PublishTo encodes payload (Encode) and publishes it through p as the event named event, matched
// on match (see PublishRequest.Match). Through a codec's publisher the payload is stored encoded.
func PublishTo(ctx context.Context, p EventPublisher, event string, payload any, match map[string]any) (Published, error) {
	b, err := Encode(payload)
	if err != nil {
		return Published{}, err
	}
	return p.PublishMatched(ctx, PublishRequest{Event: event, Payload: b, Match: match})
}

// MatchedEffects is implemented by runtimes whose durable publish can carry match fields (the
// worker's replay runtime).
type MatchedEffects interface {
	// PublishMatched is Effects.Publish with the event's match fields (canonical pairs,
	// history.MatchKeys) given beside the payload.
	PublishMatched(c *Ctx, name, event string, payload []byte, match []string) (eventID string, err error)
}

// PublishMatch is Publish with the fields waits match on given beside the payload (see
// PublishRequest.Match): the engine matches on them only, so on a worker with a codec
// (codec/wrap.Frontend) the payload is stored encoded. The match fields are stored in the clear.
func PublishMatch(c *Ctx, event string, payload any, match Match) (string, error) {
	return PublishAsMatch(c, "publish:"+event, event, payload, match)
}

// PublishAsMatch is PublishMatch with the durable call's name given.
func PublishAsMatch(c *Ctx, name, event string, payload any, match Match) (string, error) {
	fx, ok := rtOf(c).(MatchedEffects)
	if !ok {
		return "", Errorf(CodeInvariant, "publish %s: this runtime cannot publish with match fields", name)
	}
	if match == nil {
		match = Match{} // given, and empty: no fields
	}
	keys, err := history.MatchKeys(match)
	if err != nil {
		return "", Wrap(CodeEncoding, err, "publish %q", name)
	}
	b, err := Encode(payload)
	if err != nil {
		return "", err
	}
	return fx.PublishMatched(c, name, event, b, keys)
}
