// Package jobs is a durable workflow engine for Go: a job is a plain Go function whose steps,
// sleeps and event waits are recorded in the run's history, so a run survives crashes, restarts
// and deploys, and resumes where it stopped.
//
// # Writing a job
//
// Define takes the job's name, its idempotency key and its tenant (both required: leaving one out
// does not compile) and its body:
//
//	var Onboard = jobs.MustDefine("onboard-org",
//		func(in Signup) string { return "onboard:" + in.OrgID },      // key: one live run per org
//		jobs.TenantFrom(func(in Signup) string { return in.OrgID }),    // or jobs.NoTenant[Signup]()
//		func(ctx *jobs.Ctx, in Signup) (string, error) {
//			db, err := jobs.Step(ctx, "provision", func(ctx context.Context) (string, error) {
//				return provision(ctx, in.OrgID) // runs once ever; its result is recorded
//			})
//			if err != nil {
//				return "", err
//			}
//			if err := jobs.Sleep(ctx, "grace-period", 72*time.Hour); err != nil { // holds no worker
//				return "", err
//			}
//			plan, ok, err := jobs.WaitForEvent[PlanChosen](ctx, "plan", "plan.chosen",
//				jobs.Match{"orgId": in.OrgID}, 14*24*time.Hour)
//			if err != nil || !ok { // !ok: the timeout came first, an outcome and not an error
//				return "", err
//			}
//			return welcome(ctx, db, plan.Plan)
//		},
//		jobs.Retry(jobs.RetryPolicy{Attempts: 5, Backoff: jobs.Exponential, Delay: time.Second}))
//
// The rules a body keeps:
//   - Every durable call (Step, Sleep, WaitForEvent, Publish, EnqueueFrom) has a name that is
//     unique in the run and stable across deploys; it is the call's identity when the run is
//     replayed. Name calls for what they do, never for their arguments: that is why Sleep takes a
//     name and SleepFor, which derives it from the duration, is the exception.
//   - Code between durable calls is replayed: it must be deterministic. Anything that reads the
//     world (time, randomness, the network, the database) goes in a Step.
//   - A step runs at least once and its result is recorded once; make its side effects
//     idempotent (the run id and step name make a good key).
//
// # Running jobs
//
// The engine (package engine) owns the runs, over a store (store/memory for tests,
// store/sqlite embedded, store/postgres for many processes). A worker (package worker, or
// package host for a whole worker process) executes the bodies; it reaches the engine in-process
// or over HTTP (package api). The binaries cmd/engine and cmd/worker are built from the same
// parts. Package jobstest runs jobs in a test with a fake clock.
//
// # Errors
//
// Every refusal is a *Error carrying an X_ code (see Codes for the table with each code's retry
// class and meaning). CodeOf reads the code of any error.
//
// The docs/ directory of the repository holds a guide (writing a job, embedding the engine,
// remote workers) and the architecture.
package jobs
