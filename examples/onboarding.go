// Package examples holds the jobs the reference worker (cmd/worker) hosts: an organisation's
// onboarding (steps, a durable sleep, an event wait) and an order saga (a reservation released by
// a compensation when payment does not come in time). Their steps are deterministic and touch no
// network, so tests and the end-to-end suite can run them for real, and their recorded histories
// under testdata/ are replayed against the current code as a deploy regression test.
package examples

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
)

// Defaults of the examples' waits, realistic for production.
const (
	// DefaultOnboardingSleep is the pause between seeding an organisation and asking it to
	// choose a plan: a day to look around.
	DefaultOnboardingSleep = 24 * time.Hour
	// DefaultPlanTimeout is how long onboarding waits for "plan.chosen" before it goes on with
	// the free plan.
	DefaultPlanTimeout = 7 * 24 * time.Hour
	// DefaultPaymentTimeout is how long an order holds its reservation waiting for
	// "payment.received".
	DefaultPaymentTimeout = 30 * time.Minute
)

// OnboardingInput names the organisation to onboard.
type OnboardingInput struct {
	OrgID string `json:"orgId"`
	Name  string `json:"name,omitempty"`
	Owner string `json:"owner,omitempty"`
}

// Provisioned is what the provision step created.
type Provisioned struct {
	Database string `json:"database"`
	Region   string `json:"region"`
}

// Seeded is what the seed step wrote.
type Seeded struct {
	Projects int `json:"projects"`
	Members  int `json:"members"`
}

// PlanChosen is the payload of the "plan.chosen" event; OrgID selects the run it is for.
type PlanChosen struct {
	OrgID string `json:"orgId"`
	Plan  string `json:"plan"`
}

// OnboardingResult is a completed onboarding.
type OnboardingResult struct {
	Database string `json:"database"`
	Plan     string `json:"plan"`
	// PlanTimedOut is true when no plan was chosen in time and the org got the free plan.
	PlanTimedOut bool   `json:"planTimedOut,omitempty"`
	Welcome      string `json:"welcome"`
}

// Onboarding is the onboarding job with the default sleep and timeout.
var Onboarding = NewOnboarding(0, 0)

// OnboardingName is the onboarding job's name, the one enqueues name.
const OnboardingName = "onboard-org"

// NewOnboarding defines the onboarding job with its sleep and plan timeout (0 for the defaults).
// The durations are not part of the history's names, so a run recorded with one sleep replays
// against code configured with another.
func NewOnboarding(sleep, planTimeout time.Duration) *jobs.Job[OnboardingInput, OnboardingResult] {
	if sleep <= 0 {
		sleep = DefaultOnboardingSleep
	}
	if planTimeout <= 0 {
		planTimeout = DefaultPlanTimeout
	}
	return jobs.MustDefine(OnboardingName,
		func(in OnboardingInput) string { return "onboard:" + in.OrgID },
		jobs.TenantFrom(func(in OnboardingInput) string { return in.OrgID }),
		func(ctx *jobs.Ctx, in OnboardingInput) (OnboardingResult, error) {
			return onboard(ctx, in, sleep, planTimeout)
		},
		// The default queue: an operator's `engine jobs enqueue onboard-org` (which cannot know a
		// job's queue) reaches the worker without naming one.
		jobs.Retry(jobs.RetryPolicy{Attempts: 5, Backoff: jobs.Exponential, Delay: time.Second, MaxDelay: time.Minute}),
	)
}

func onboard(ctx *jobs.Ctx, in OnboardingInput, sleep, planTimeout time.Duration) (OnboardingResult, error) {
	if in.OrgID == "" {
		return OnboardingResult{}, jobs.Errorf(jobs.CodeBadRequest, "onboarding needs an orgId")
	}
	db, err := jobs.Step(ctx, "provision", func(context.Context) (Provisioned, error) {
		return Provisioned{Database: "db-" + in.OrgID, Region: region(in.OrgID)}, nil
	})
	if err != nil {
		return OnboardingResult{}, err
	}
	if _, err := jobs.Step(ctx, "seed", func(context.Context) (Seeded, error) {
		return Seeded{Projects: 1, Members: 1}, nil
	}); err != nil {
		return OnboardingResult{}, err
	}
	// A fixed name rather than jobs.SleepFor's duration-derived one: the sleep is configurable,
	// and a run recorded under one setting must replay under another.
	if err := jobs.Sleep(ctx, "look-around", sleep); err != nil {
		return OnboardingResult{}, err
	}
	plan, chosen, err := jobs.WaitForEvent[PlanChosen](ctx, "plan", "plan.chosen", jobs.Match{"orgId": in.OrgID}, planTimeout)
	if err != nil {
		return OnboardingResult{}, err
	}
	res := OnboardingResult{Database: db.Database, Plan: plan.Plan}
	if !chosen {
		res.Plan, res.PlanTimedOut = "free", true
	}
	res.Welcome, err = jobs.Step(ctx, "welcome", func(ctx context.Context) (string, error) {
		// The actor is the tenant the job declared: the step acts for this org and no other.
		if a, _ := jobs.ActorFrom(ctx); a.Tenant != in.OrgID {
			return "", jobs.Errorf(jobs.CodeInvariant, "welcome runs as tenant %q, not %q", a.Tenant, in.OrgID)
		}
		name := in.Name
		if name == "" {
			name = in.OrgID
		}
		return fmt.Sprintf("Welcome to the %s plan, %s!", res.Plan, name), nil
	})
	return res, err
}

// region places an org deterministically, so a replayed run and a live one agree.
func region(orgID string) string {
	regions := []string{"eu-west", "us-east", "ap-south"}
	sum := 0
	for _, r := range strings.ToLower(orgID) {
		sum += int(r)
	}
	return regions[sum%len(regions)]
}
