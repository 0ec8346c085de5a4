package signals

import (
	"context"
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// Match fields given beside the payload. The store matches waits on an event's fields (sorted
// canonical "name=value" pairs) and never reads the payload, so a publisher that gives the fields
// itself may send a payload the engine cannot read: one its codec encoded (encrypted). The fields
// are stored in the clear with the event.

// Bounds on the match fields given beside a payload: they are stored with the event and compared
// at every wait, so they stay small. A pair is at most what a wait's pair may be (the engine holds
// a wait's pairs to jobs.ValidIdentifier): it was 1,024 bytes, so a pair of 1,001 to 1,024 bytes
// was stored with its event and matched no wait ever (TestAMatchPairNoWaitCanHoldIsRefused).
const (
	maxMatchFields = 32
	maxMatchPair   = jobs.MaxIdentifier
)

// PublishMatched is PublishID with the event's match fields given: match nil matches on the
// payload's own fields, as PublishID does; otherwise the fields are exactly match's (empty: none)
// and the payload is not read, so it may be a codec envelope.
func (s *Service) PublishMatched(ctx context.Context, id, name string, payload []byte, match map[string]any) (Published, error) {
	if Reserved(name) {
		return Published{}, jobs.Errorf(jobs.CodeBadRequest, "event %q: names starting with %q are the engine's own", name, ReservedPrefix)
	}
	return s.publish(ctx, nil, id, name, payload, func() ([]string, error) { return s.fields(name, payload, match) })
}

// PublishPairs is PublishMatched with the match fields already in their canonical form (sorted
// "name=value" pairs, history.MatchKeys), as a run's durable publish sends them: the engine
// checks the form, since a pair out of it would never match, or match wrongly.
func (s *Service) PublishPairs(ctx context.Context, id, name string, payload []byte, pairs []string) (Published, error) {
	return s.publishPairs(ctx, nil, id, name, payload, pairs)
}

// PublishPairsUnder is PublishPairs made by a run under its claim, as PublishIDUnder is
// PublishID: nothing is published unless the run still holds the claim at the publish's commit.
func (s *Service) PublishPairsUnder(ctx context.Context, under store.Lease, id, name string, payload []byte, pairs []string) (Published, error) {
	return s.publishPairs(ctx, &under, id, name, payload, pairs)
}

func (s *Service) publishPairs(ctx context.Context, under *store.Lease, id, name string, payload []byte, pairs []string) (Published, error) {
	if Reserved(name) {
		return Published{}, jobs.Errorf(jobs.CodeBadRequest, "event %q: names starting with %q are the engine's own", name, ReservedPrefix)
	}
	if len(pairs) > maxMatchFields {
		return Published{}, jobs.Errorf(jobs.CodeBadRequest, "event %q: %d match fields; the limit is %d", name, len(pairs), maxMatchFields)
	}
	for i, p := range pairs {
		if err := jobs.ValidIdentifier("match field", p); err != nil {
			return Published{}, err
		}
		if k, _, ok := strings.Cut(p, "="); !ok || k == "" {
			return Published{}, jobs.Errorf(jobs.CodeBadRequest, "event %q: match field %q is not name=value", name, p)
		}
		if len(p) > maxMatchPair {
			return Published{}, jobs.Errorf(jobs.CodeBadRequest, "event %q: the match field %.40q… is %d bytes with its value; the limit is %d", name, p, len(p), maxMatchPair)
		}
		if i > 0 && pairs[i-1] >= p {
			return Published{}, jobs.Errorf(jobs.CodeBadRequest, "event %q: match fields are not sorted and unique (%q, then %q)", name, pairs[i-1], p)
		}
	}
	return s.publish(ctx, under, id, name, payload, func() ([]string, error) { return pairs, nil })
}

// fields returns the match fields of an event: match's when given, else the payload's own.
func (s *Service) fields(name string, payload []byte, match map[string]any) ([]string, error) {
	if match != nil {
		return matchFields(name, match)
	}
	if what, ok := codec.Describe(payload); ok {
		// The engine cannot read the fields of an encoded payload: refusing beats storing an
		// event no wait with a match could ever receive.
		return nil, jobs.Errorf(jobs.CodeBadRequest,
			"event %q: the payload is %s, so the engine cannot match waits on its fields: send the match fields beside it (PublishRequest.Match, or the API's match parameter; {} for none)", name, what)
	}
	fields, err := history.FieldKeys(payload)
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeEncoding, err, "event %q", name)
	}
	// Only the pairs a wait can match on are kept: a wait's pairs are identifiers (no NUL, valid
	// UTF-8, at most 1,000 bytes), so no wait matches any other. Kept, a field whose name held a
	// NUL, or a long signature or token in a field, made Postgres refuse the event (its fields
	// are a text array under an index whose rows are bounded), where the other stores took it.
	kept := fields[:0]
	for _, f := range fields {
		if jobs.ValidIdentifier("match pair", f) == nil {
			kept = append(kept, f)
		}
	}
	return kept, nil
}

func matchFields(name string, match map[string]any) ([]string, error) {
	if len(match) > maxMatchFields {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "event %q: %d match fields; the limit is %d", name, len(match), maxMatchFields)
	}
	for k := range match {
		if k == "" {
			return nil, jobs.Errorf(jobs.CodeBadRequest, "event %q: a match field needs a name", name)
		}
		if err := jobs.ValidIdentifier("match field name", k); err != nil {
			return nil, err
		}
	}
	pairs, err := history.MatchKeys(match)
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeBadRequest, err, "event %q", name)
	}
	for _, p := range pairs {
		if len(p) > maxMatchPair {
			return nil, jobs.Errorf(jobs.CodeBadRequest, "event %q: the match field %.40q… is %d bytes with its value; the limit is %d", name, p, len(p), maxMatchPair)
		}
	}
	return pairs, nil
}
