package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ultimat3/jobs/bench/internal/record"
	"github.com/ultimat3/jobs/bench/systems"
)

// Section 8 shows the pass with OverlapCheckpoints on a row of its own, beside the default pass
// and divided by the same loop; the default pass's row reads as it did without it.
func TestBackfillsRenderTheOverlappedPassBesideTheDefault(t *testing.T) {
	sample := func(scen string, run int, rate float64) record.Sample {
		return record.Sample{Scenario: scen, System: "jobs", Label: "jobs", Run: run, N: 1000,
			Units: 1000, Rate: rate, Backend: "postgres", PostgresCPU: -1, ForeignCPU: -1}
	}
	var samples []record.Sample
	for r := 1; r <= 3; r++ {
		samples = append(samples,
			sample(systems.ScenarioBackfill, r, 80+float64(r)),
			sample(systems.ScenarioBackfillOverlap, r, 90+float64(r)),
			sample(systems.ScenarioBackfillLoop, r, 100))
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	renderBackfills(w, samples, []string{"jobs"}, Info{BackfillRows: 1000})
	out := b.String()
	for _, want := range []string{
		"| **jobs** | postgres | 1000 | 82 (81–83) | 100 (100–100) | 0.82× |",
		"| **jobs**, `OverlapCheckpoints()` | postgres | 1000 | 92 (91–93) | 100 (100–100) | 0.92× |",
		"The target is the default pass at ≥ 0.9×",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section 8 lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "| **jobs** |") > strings.Index(out, "`OverlapCheckpoints()` |") {
		t.Errorf("the overlapped pass comes before the default pass:\n%s", out)
	}

	// Measured alone (BENCH_SCENARIOS=backfill-overlap,backfill-loop), it still has its row.
	var alone []record.Sample
	for _, s := range samples {
		if s.Scenario != systems.ScenarioBackfill {
			alone = append(alone, s)
		}
	}
	b.Reset()
	renderBackfills(w, alone, []string{"jobs"}, Info{BackfillRows: 1000})
	if out := b.String(); !strings.Contains(out, "`OverlapCheckpoints()` | postgres | 1000 | 92") || strings.Contains(out, "| **jobs** | postgres") {
		t.Errorf("the overlapped pass measured alone:\n%s", out)
	}
}
