// Package signals delivers what reaches a run from outside: published events, matched to the
// runs waiting for them (with a lookback window, so a wait registered just after the publish
// still receives it), and cancellations.
package signals

import (
	"context"
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/uuid7"
	"github.com/ultimat3/jobs/internal/wire"
	"github.com/ultimat3/jobs/store"
)

// Config configures the signals service.
type Config struct {
	Store store.Store
	Clock clock.Clock
	// MaxPayload bounds an event's encoded payload. Defaults to 1 MiB.
	MaxPayload int
	// OnWake is told of runs that became ready.
	OnWake func([]store.Woken)
}

// Service is the signals service.
type Service struct{ cfg Config }

// New returns a signals service.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = 1 << 20
	}
	if cfg.OnWake == nil {
		cfg.OnWake = func([]store.Woken) {}
	}
	return &Service{cfg: cfg}
}

// Published is the outcome of a publish.
type Published = jobs.Published

// Publish publishes an event whose payload is msgpack-encoded.
func (s *Service) Publish(ctx context.Context, name string, payload []byte) (Published, error) {
	return s.PublishID(ctx, "", name, payload)
}

// PublishID is Publish under a given event id ("" makes a fresh one). The store keeps an event's
// id for the lookback window and a second publish of a kept id is a no-op, so a caller that may
// send one publish twice (a run's durable publish, retried) names it.
func (s *Service) PublishID(ctx context.Context, id, name string, payload []byte) (Published, error) {
	if Reserved(name) {
		return Published{}, jobs.Errorf(jobs.CodeBadRequest, "event %q: names starting with %q are the engine's own", name, ReservedPrefix)
	}
	return s.PublishSystem(ctx, id, name, payload)
}

// PublishIDUnder is PublishID made by a run under its claim (a run's durable publish): the store
// publishes only while the run is running under under.Fence, checked in the publish's own
// transaction, and otherwise refuses it with the error the run's record would get (X_ABORTED
// when cancelled, X_JOB_LEASE_LOST), publishing nothing. The claim is checked before the id: a
// publish whose id is kept is refused too once the claim no longer holds (store.PublishParams).
func (s *Service) PublishIDUnder(ctx context.Context, under store.Lease, id, name string, payload []byte) (Published, error) {
	if Reserved(name) {
		return Published{}, jobs.Errorf(jobs.CodeBadRequest, "event %q: names starting with %q are the engine's own", name, ReservedPrefix)
	}
	return s.publish(ctx, &under, id, name, payload, func() ([]string, error) { return s.fields(name, payload, nil) })
}

// ReservedPrefix starts the names of the events only the engine publishes (jobs.ChildEvent): a
// client or a run cannot forge a child's outcome.
const ReservedPrefix = "jobs:"

// Reserved reports whether an event name is the engine's own.
func Reserved(name string) bool { return strings.HasPrefix(name, ReservedPrefix) }

// PublishSystem is PublishID without the reserved-name check: for the engine's own events.
func (s *Service) PublishSystem(ctx context.Context, id, name string, payload []byte) (Published, error) {
	return s.publish(ctx, nil, id, name, payload, func() ([]string, error) { return s.fields(name, payload, nil) })
}

// publish stores and delivers one event; fields returns its match fields (matched.go). under,
// when not nil, is the claim the publish is conditional on (store.PublishParams.Under).
func (s *Service) publish(ctx context.Context, under *store.Lease, id, name string, payload []byte, fields func() ([]string, error)) (Published, error) {
	if name == "" {
		return Published{}, jobs.Errorf(jobs.CodeBadRequest, "an event needs a name")
	}
	if err := jobs.ValidIdentifier("event name", name); err != nil {
		return Published{}, err
	}
	if len(payload) > s.cfg.MaxPayload {
		return Published{}, jobs.Errorf(jobs.CodePayloadTooLarge, "event %q: payload is %d bytes, the limit is %d", name, len(payload), s.cfg.MaxPayload)
	}
	if len(payload) > 0 {
		// Stored and delivered to job code, and shown by every surface: refuse what one of them
		// could not read (see wire.Value).
		if err := wire.Value(payload); err != nil {
			return Published{}, err
		}
	}
	pairs, err := fields()
	if err != nil {
		return Published{}, err
	}
	now := s.cfg.Clock.Now()
	if id == "" {
		id = uuid7.New(now)
	}
	res, err := s.cfg.Store.RunPublish(ctx, store.PublishParams{ID: id, Name: name, Payload: payload, Fields: pairs, Now: now, Under: under})
	if err != nil {
		return Published{}, err
	}
	if len(res.Delivered) > 0 {
		s.cfg.OnWake(res.Delivered)
	}
	return Published{EventID: id, Delivered: len(res.Delivered)}, nil
}

// Cancel cancels a run: at once when it is queued, suspended or blocked; a running one stops at
// its worker's next heartbeat, and every write it attempts after this is refused (X_ABORTED).
func (s *Service) Cancel(ctx context.Context, runID, reason string) (store.Run, error) {
	now := s.cfg.Clock.Now()
	return s.cfg.Store.RunCancel(ctx, runID, history.New(now, history.RunCancelled{Reason: reason}), now)
}
