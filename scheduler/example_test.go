package scheduler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

type DigestInput struct {
	List string `json:"list"`
}

// Digest is an ordinary job; the schedule is declared beside it.
var Digest = jobs.MustDefine("send-digest", func(in DigestInput) string { return "digest:" + in.List },
	jobs.NoTenant[DigestInput](), func(_ *jobs.Ctx, in DigestInput) (string, error) { return "sent " + in.List, nil })

// NightlyDigest fires Digest at 03:00 Berlin time; after downtime it catches up once.
var NightlyDigest = scheduler.MustDefine("nightly-digest", Digest, "0 3 * * *", "Europe/Berlin",
	DigestInput{List: "all"}, scheduler.CatchUp(scheduler.RunOnce))

// An app embedding the engine runs the scheduler beside it. The fake clock stands in for three
// nights; a real app calls s.Start(ctx) and lets the rounds run every second.
func Example() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	eng, _ := engine.New(engine.Config{Store: memory.New(), Clock: clk, AllowUndeclared: true})
	_ = eng.Start(ctx)
	defer eng.Stop(ctx)

	s, err := scheduler.New(scheduler.Config{Engine: eng, Schedules: scheduler.Static(NightlyDigest)})
	if err != nil {
		panic(err)
	}
	defer s.Stop(ctx) // releases the lease, so another engine leads at once

	_ = s.Tick(ctx)                 // first seen: nothing fires retroactively
	clk.Advance(3 * 24 * time.Hour) // three nights without a scheduler
	_ = s.Tick(ctx)                 // run-once: the earliest missed night, once
	clk.Advance(24 * time.Hour)
	_ = s.Tick(ctx) // the next night, on time

	runs, _ := eng.ListRuns(ctx, store.ListParams{Job: "send-digest"})
	for i := len(runs) - 1; i >= 0; i-- {
		fmt.Println(runs[i].Key)
	}
	in, _ := s.Get(ctx, "nightly-digest")
	fmt.Println("missed:", in.Missed, "next:", in.Next[0].Format(time.RFC3339))
	// Output:
	// nightly-digest@2026-03-02T02:00:00Z
	// nightly-digest@2026-03-05T02:00:00Z
	// missed: 2 next: 2026-03-06T03:00:00+01:00
}
