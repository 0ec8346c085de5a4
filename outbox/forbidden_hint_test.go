package outbox

import (
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
)

// forbids refuses every enqueue as an API does a credential that may not make it (a relay's
// credential scoped to one tenant, and a row of another).
type forbids struct{}

func (forbids) Enqueue(context.Context, jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	return jobs.EnqueueResult{}, jobs.Errorf(jobs.CodeForbidden, "this credential may enqueue for tenant acme only")
}

// A row the relay's credential may not publish holds the line, as one naming an undeclared job
// does, and the pass's error says how it ends: a credential that may, or setting the row aside.
// It said nothing, and X_FORBIDDEN reads as the relay's wiring alone.
func TestAForbiddenRowSaysHowItEnds(t *testing.T) {
	eachBackendWith(t, testenv.Options{}, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		row := stage(t, b, ob, "1")
		r := newRelay(t, b, env, forbids{}, "r1", 10)
		n, err := r.Pass(t.Context())
		if !jobs.HasCode(err, jobs.CodeForbidden) || !strings.Contains(err.Error(), row[0]) ||
			!strings.Contains(err.Error(), "SetAside") || !strings.Contains(err.Error(), "credential") {
			t.Fatalf("pass: %d, %v; want a stop at row %s with X_FORBIDDEN that names the way out", n, err, row[0])
		}
		if got := backlogOf(t, b.outbox); got != 1 {
			t.Fatalf("backlog %d, want the held row", got)
		}
	})
}
