package outbox

import (
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/ultimat3/jobs/internal/testenv"
)

// A staged enqueue keeps the stager's trace context: the run the relay creates later is stamped
// with it, not with the relay's.
func TestStagedEnqueueKeepsTheStagersTrace(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
			TraceFlags: trace.FlagsSampled})
		ctx := trace.ContextWithSpanContext(t.Context(), sc)
		tx, commit, _ := b.begin(t)
		if _, err := noteJob.EnqueueTx(ctx, ob.Tx(tx), Note{ID: "traced"}); err != nil {
			t.Fatal(err)
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
		if n := pass(t, newRelay(t, b, env, env.Engine, "r1", 0)); n != 1 {
			t.Fatalf("published %d rows, want 1", n)
		}
		runs := runsOf(t, env)["note:traced"]
		if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; len(runs) != 1 || runs[0].TraceParent != want {
			t.Fatalf("runs %+v, want one stamped %s", runs, want)
		}
	})
}
