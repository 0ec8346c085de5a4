package jobs_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
)

func noop(*jobs.Ctx, string) (string, error) { return "", nil }

func keyOf(s string) string { return s }

// TestDefineRefusesWhatNoStoreHolds: a job or queue name that no store can keep is refused at
// Define, at start-up, never later by a store or a worker polling forever.
func TestDefineRefusesWhatNoStoreHolds(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"NUL":             "a\x00b",
		"invalid UTF-8":   "a\xffb",
		"5,000 bytes":     strings.Repeat("j", 5000),
		"lone surrogate?": string([]byte{0xed, 0xa0, 0x80}),
	}
	for what, name := range bad {
		if _, err := jobs.Define(name, keyOf, jobs.NoTenant[string](), noop); !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("job name with %s: %v, want X_JOB_DEFINITION", what, err)
		}
		if _, err := jobs.Define("j", keyOf, jobs.NoTenant[string](), noop, jobs.Queue(name)); !jobs.HasCode(err, jobs.CodeJobDefinition) {
			t.Errorf("queue name with %s: %v, want X_JOB_DEFINITION", what, err)
		}
	}
	if _, err := jobs.Define("j", keyOf, jobs.NoTenant[string](), noop, jobs.Timeout(time.Second), nil); !jobs.HasCode(err, jobs.CodeJobDefinition) {
		t.Errorf("a nil option: %v, want X_JOB_DEFINITION", err)
	}
	if _, err := jobs.Define(strings.Repeat("j", 1000), keyOf, jobs.NoTenant[string](), noop, jobs.Queue("q")); err != nil {
		t.Errorf("a 1,000-byte name: %v", err)
	}
}

// TestRetryPolicyNeverPanics: any policy a user can write prints and decides.
func TestRetryPolicyNeverPanics(t *testing.T) {
	t.Parallel()
	for _, p := range []jobs.RetryPolicy{
		{Attempts: math.MaxInt},
		{Attempts: math.MaxInt, Backoff: jobs.Exponential, Delay: math.MaxInt64},
		{Attempts: math.MinInt},
		{Attempts: 3, Delay: -1, MaxDelay: -1, Backoff: "sideways"},
	} {
		s := p.String()
		if s == "" {
			t.Errorf("%#v printed nothing", p)
		}
		if len(p.Schedule()) > 1000 {
			t.Errorf("%#v: a schedule of %d waits", p, len(p.Schedule()))
		}
		for _, d := range p.Schedule() {
			if d < 0 && p.Delay >= 0 {
				t.Errorf("%#v: a negative wait %s", p, d)
			}
		}
		p.Decide(math.MaxInt, nil)
	}
	if s := (jobs.RetryPolicy{Attempts: math.MaxInt}).String(); !strings.Contains(s, "…") {
		t.Errorf("a long schedule prints whole: %q", s)
	}
}
