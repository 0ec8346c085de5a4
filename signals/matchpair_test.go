package signals_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/signals"
	"github.com/ultimat3/jobs/store/memory"
)

// A match field given beside the payload is a pair a wait can hold, or the publish is refused: a
// wait's pairs are identifiers (at most jobs.MaxIdentifier bytes, engine checks), so a longer
// pair was stored with the event and reached no wait, a silent no-delivery. The payload's own
// fields keep only such pairs (fields), and a run's durable publish refuses others
// (PublishPairs); a publisher naming its fields now meets the same bound.
func TestAMatchPairNoWaitCanHoldIsRefused(t *testing.T) {
	t.Parallel()
	s := signals.New(signals.Config{Store: memory.New()})
	ctx := context.Background()
	payload, _ := jobs.Encode("x")
	// `a="` + value + `"`: 4 bytes around the value.
	fits := strings.Repeat("x", jobs.MaxIdentifier-4)
	if _, err := s.PublishMatched(ctx, "", "e", payload, map[string]any{"a": fits}); err != nil {
		t.Fatalf("a pair of %d bytes: %v", jobs.MaxIdentifier, err)
	}
	for _, n := range []int{jobs.MaxIdentifier - 3, jobs.MaxIdentifier + 20, 2000} {
		long := strings.Repeat("x", n)
		if _, err := s.PublishMatched(ctx, "", "e", payload, map[string]any{"a": long}); jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("a pair of %d bytes: %v, want X_BAD_REQUEST", n+4, err)
		}
		if _, err := s.PublishPairs(ctx, "", "e", payload, []string{`a="` + long + `"`}); jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("canonical pair of %d bytes: %v, want X_BAD_REQUEST", n+4, err)
		}
	}
}
