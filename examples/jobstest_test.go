package examples_test

import (
	"testing"

	"github.com/ultimat3/jobs/examples"
	"github.com/ultimat3/jobs/jobstest"
)

// TestOnboardingWithTheTestKit is how an application tests its own job with the public test kit:
// an in-process engine with a fake clock, the job hosted by a worker, time advanced past the
// job's sleep, the event published, and the outcome read from the run's history and result.
func TestOnboardingWithTheTestKit(t *testing.T) {
	t.Parallel()
	env := jobstest.New(t, jobstest.Options{}, examples.Onboarding)

	run := jobstest.Enqueue(env, examples.Onboarding, examples.OnboardingInput{OrgID: "acme", Name: "Acme"})
	env.AwaitSuspended(run) // asleep: a day to look around
	env.AssertSteps(run, "step:provision", "step:seed", "sleep:look-around")

	env.Advance(examples.DefaultOnboardingSleep) // a day, in microseconds
	env.AwaitSuspended(run)                      // now waiting for the plan
	env.Publish("plan.chosen", examples.PlanChosen{OrgID: "acme", Plan: "pro"})

	res := jobstest.Result(env, examples.Onboarding, run)
	if res.Plan != "pro" || res.Welcome != "Welcome to the pro plan, Acme!" {
		t.Fatalf("result %+v", res)
	}
	env.AssertSteps(run, "step:provision", "step:seed", "sleep:look-around", "wait:plan", "step:welcome")
}

// With no plan chosen, RunToCompletion sleeps through the wait's timeout: the free plan.
func TestOnboardingTimesOutToTheFreePlan(t *testing.T) {
	t.Parallel()
	env := jobstest.New(t, jobstest.Options{SQLite: true}, examples.Onboarding)
	run := jobstest.Enqueue(env, examples.Onboarding, examples.OnboardingInput{OrgID: "quiet"})
	env.RunToCompletion(run)
	if res := jobstest.Result(env, examples.Onboarding, run); res.Plan != "free" || !res.PlanTimedOut {
		t.Fatalf("result %+v", res)
	}
	if elapsed := env.Clock.Now().Sub(jobstest.Epoch); elapsed < examples.DefaultOnboardingSleep+examples.DefaultPlanTimeout {
		t.Errorf("only %s passed", elapsed)
	}
}
