package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// The scheduler keeps each declaration parsed (and each refusal logged) by checksum, and every
// round reads the declarations again: a declaration that changes (a deploy that changes its
// input or spec, a worker that declares a new input at every start) is a new checksum. What the
// provider no longer declares is forgotten, so the scheduler holds what is declared now, not
// every version ever declared; a refusal still declared is still logged once.
func TestReplacedDeclarationsAreNotKept(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	logs := &testenv.LogBuffer{}
	round := 0
	provider := func(context.Context) ([]Schedule, error) {
		in, _ := jobs.Encode(fmt.Sprintf("build %d", round))
		return []Schedule{
			{Name: "changing", Spec: "0 3 * * *", TZ: "UTC", Job: "ping", NoTenant: true, Input: in},
			{Name: "refused-changing", Spec: fmt.Sprintf("%d 3 * * *", round%60), TZ: "Bogota", Job: "ping", NoTenant: true, Input: in},
			{Name: "refused-stable", Spec: "0 3 * * *", TZ: "Bogota", Job: "ping", NoTenant: true},
		}, nil
	}
	s, err := New(Config{Engine: env.Engine, Schedules: provider, ID: "a", Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	for round = range 200 {
		if err := s.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Inspect(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	compiled, refused := len(s.compiled), len(s.refused)
	s.mu.Unlock()
	if compiled != 1 || refused != 2 {
		t.Errorf("after 200 deploys the scheduler keeps %d parsed declarations and %d refusals; 1 and 2 are declared", compiled, refused)
	}
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "jobs.scheduler.refused") && strings.Contains(line, "schedule=refused-stable") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the stable refusal was logged %d times, want once", n)
	}
}
