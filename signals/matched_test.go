package signals_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/signals"
	"github.com/ultimat3/jobs/store/memory"
)

// Match fields a run's durable publish sends in their canonical form are checked: a pair out of
// that form would never match a wait, or match the wrong one.
func TestPublishPairsRefusals(t *testing.T) {
	t.Parallel()
	s := signals.New(signals.Config{Store: memory.New()})
	ctx := context.Background()
	payload, _ := jobs.Encode("x")
	many := make([]string, 33)
	for i := range many {
		many[i] = "f" + strings.Repeat("a", i) + "=1"
	}
	for name, pairs := range map[string][]string{
		"not name=value":  {"orderId"},
		"no name":         {`="o-1"`},
		"unsorted":        {`b=1`, `a=1`},
		"twice":           {`a=1`, `a=1`},
		"too many":        many,
		"too long":        {"a=" + strings.Repeat("x", 1100)},
		"NUL in the pair": {"a=\x00"},
	} {
		if _, err := s.PublishPairs(ctx, "", "e", payload, pairs); jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("%s: %v, want X_BAD_REQUEST", name, err)
		}
	}
	if _, err := s.PublishPairs(ctx, "", "jobs:child", payload, nil); jobs.CodeOf(err) != jobs.CodeBadRequest {
		t.Errorf("reserved name: %v, want X_BAD_REQUEST", err)
	}
	if res, err := s.PublishPairs(ctx, "", "e", payload, []string{`a=1`, `b="x"`}); err != nil || res.EventID == "" {
		t.Errorf("canonical pairs: %+v, %v", res, err)
	}
}
