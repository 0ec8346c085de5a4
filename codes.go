package jobs

// Code is a stable error code. Codes are API: clients, the CLI's exit paths and dashboards match
// on them, so a code is never renamed or reused.
type Code string

// RetryClass says what the queue does with an attempt that failed with a code.
type RetryClass string

const (
	// Terminal: dead-lettered on the attempt it happened; the remaining attempts are unspent.
	Terminal RetryClass = "terminal"
	// RetryAfter: retried at the time the error names (Error.RetryAfter), clamped by the policy's
	// MaxDelay. Still an attempt, still under the ceiling.
	RetryAfter RetryClass = "retry-after"
	// Retryable: the policy's backoff schedule.
	Retryable RetryClass = "retryable"
	// Unclassified: the backoff schedule, exactly like Retryable. Most codes are unclassified,
	// and reading that as terminal would stop every transient retry in every app.
	Unclassified RetryClass = "unclassified"
)

// The engine's codes. Each is declared once, in the table below, with its class and meaning.
const (
	CodeStepDuplicate            Code = "X_STEP_DUPLICATE"
	CodeStepNested               Code = "X_STEP_NESTED"
	CodeReplayDiverged           Code = "X_REPLAY_DIVERGED"
	CodeJobIdempotencyRequired   Code = "X_JOB_IDEMPOTENCY_REQUIRED"
	CodeJobTenantRequired        Code = "X_JOB_TENANT_REQUIRED"
	CodeJobDefinition            Code = "X_JOB_DEFINITION"
	CodeJobUnknown               Code = "X_JOB_UNKNOWN"
	CodeJobMaxAttempts           Code = "X_JOB_MAX_ATTEMPTS"
	CodeAborted                  Code = "X_ABORTED"
	CodeJobLeaseLost             Code = "X_JOB_LEASE_LOST"
	CodeJobSlotLost              Code = "X_JOB_SLOT_LOST"
	CodeJobNotCancellable        Code = "X_JOB_NOT_CANCELLABLE"
	CodeJobNotRetryable          Code = "X_JOB_NOT_RETRYABLE"
	CodeJobConcurrencyUnenforced Code = "X_JOB_CONCURRENCY_UNENFORCEABLE"
	CodeFlowKey                  Code = "X_FLOW_KEY"
	CodeRunNotFound              Code = "X_RUN_NOT_FOUND"
	CodeStepNotFound             Code = "X_STEP_NOT_FOUND"
	CodeTimeout                  Code = "X_TIMEOUT"
	CodeStepTimeout              Code = "X_STEP_TIMEOUT"
	CodeEncoding                 Code = "X_ENCODING"
	CodePayloadTooLarge          Code = "X_PAYLOAD_TOO_LARGE"
	CodeBadRequest               Code = "X_BAD_REQUEST"
	CodeUnauthorized             Code = "X_UNAUTHORIZED"
	CodeRateLimited              Code = "X_RATE_LIMITED"
	CodeOverloaded               Code = "X_OVERLOADED"
	CodeDraining                 Code = "X_DRAINING"
	CodeDriverUnavailable        Code = "X_DRIVER_UNAVAILABLE"
	CodeStoreUnavailable         Code = "X_STORE_UNAVAILABLE"
	CodeCommitUnknown            Code = "X_COMMIT_UNKNOWN"
	CodeInvariant                Code = "X_INVARIANT"
	CodeInternal                 Code = "X_INTERNAL"
	// The engine as the authority over what workers and callers send.
	CodeLeaseInvalid      Code = "X_LEASE_INVALID"
	CodeHistoryStale      Code = "X_HISTORY_STALE"
	CodeJobUndeclared     Code = "X_JOB_UNDECLARED"
	CodeQueueUndeclared   Code = "X_QUEUE_UNDECLARED"
	CodeForbidden         Code = "X_FORBIDDEN"
	CodeRouteNotFound     Code = "X_ROUTE_NOT_FOUND"
	CodeMethodNotAllowed  Code = "X_METHOD_NOT_ALLOWED"
	CodeListenFailed      Code = "X_LISTEN_FAILED"
	CodeScheduleNotFound  Code = "X_SCHEDULE_NOT_FOUND"
	CodeScheduleNotLeader Code = "X_SCHEDULE_NOT_LEADER"
	CodeScheduleConflict  Code = "X_SCHEDULE_CONFLICT"
	CodeNoScheduler       Code = "X_NO_SCHEDULER"
	CodeRunCancelled      Code = "X_RUN_CANCELLED"
	CodeWorkerLive        Code = "X_WORKER_LIVE"
	// Backfills (package backfill).
	CodeBackfillStalled          Code = "X_BACKFILL_STALLED"
	CodeBackfillEnvironment      Code = "X_BACKFILL_ENVIRONMENT"
	CodeBackfillMigrationPending Code = "X_BACKFILL_MIGRATION_PENDING"
	CodeBackfillApplied          Code = "X_BACKFILL_APPLIED"
	CodeBackfillPending          Code = "X_BACKFILL_PENDING"
	CodeBackfillLive             Code = "X_BACKFILL_LIVE"
	CodeOutboxNoTx               Code = "X_OUTBOX_NO_TX"
	// Child runs.
	CodeChildFailed Code = "X_CHILD_FAILED"
	CodeNotChild    Code = "X_NOT_CHILD"
	// Tenancy: a dedupe id or an input that belongs to another tenant.
	CodeKeyTaken          Code = "X_IDEMPOTENCY_KEY_TAKEN"
	CodeJobTenantMismatch Code = "X_JOB_TENANT_MISMATCH"
	// Trace and actor (actor.go).
	CodeActorInvalid Code = "X_ACTOR_INVALID"
	// Developer experience: what a CLI user or a second process runs into.
	CodeStoreLocked       Code = "X_STORE_LOCKED"
	CodeEngineUnreachable Code = "X_ENGINE_UNREACHABLE"
)

// CodeInfo is one row of the registry.
type CodeInfo struct {
	Code    Code       `json:"code"`
	Class   RetryClass `json:"class"`
	Meaning string     `json:"meaning"`
}

// codeTable is the one registry of every code the engine itself raises. Apps add the retry class
// of their own codes with RegisterErrorRetry.
var codeTable = []CodeInfo{
	{CodeStepDuplicate, Terminal, "the same durable-call name was used twice in one run: a code bug, never a silent overwrite"},
	{CodeStepNested, Terminal, "a durable call was made inside a step's function (or from a goroutine while the body waited for a step): it would not replay, so it is refused"},
	{CodeReplayDiverged, Terminal, "the code's durable calls no longer match the recorded history; the run is blocked until a fixed deploy and a retry"},
	{CodeJobIdempotencyRequired, Terminal, "an untyped enqueue named no idempotency key"},
	{CodeJobTenantRequired, Terminal, "a job definition or an untyped enqueue named neither a tenant nor 'no tenant'"},
	{CodeJobDefinition, Terminal, "a job definition holds a value the engine refuses (0 attempts, a non-positive duration, concurrency 0, …)"},
	{CodeJobUnknown, Retryable, "no job of that name is registered on this worker"},
	{CodeJobMaxAttempts, Terminal, "retries exhausted; the run was dead-lettered"},
	{CodeAborted, Terminal, "a cancelled or timed-out attempt tried to write to the run"},
	{CodeJobLeaseLost, Retryable, "the run was cancelled, or its lease lapsed and it was handed to another worker, while this worker still ran it"},
	{CodeJobSlotLost, Retryable, "the fleet concurrency slot this run held lapsed and was taken by another worker"},
	{CodeJobNotCancellable, Terminal, "cancel reached a run that already finished"},
	{CodeJobNotRetryable, Terminal, "retry reached a run that is neither dead-lettered nor blocked"},
	{CodeJobConcurrencyUnenforced, Terminal, "a job declares fleet concurrency and the store has no lease rows to enforce it"},
	{CodeFlowKey, Terminal, "an enqueue's run has no value for the key a job's keyed limit counts by (the input lacks the field, holds a value that cannot key, or is sealed by a codec)"},
	{CodeRunNotFound, Terminal, "no run has that id"},
	{CodeStepNotFound, Terminal, "retry-from-step named a step the run's history does not hold"},
	{CodeTimeout, Retryable, "the attempt passed the job's timeout; its context was cancelled first"},
	{CodeStepTimeout, Retryable, "a step passed the job's stepTimeout; its context was cancelled first"},
	{CodeEncoding, Terminal, "a value could not be encoded or decoded (msgpack/JSON)"},
	{CodePayloadTooLarge, Terminal, "an input, output or event payload is over the size limit"},
	{CodeBadRequest, Terminal, "a request was malformed"},
	{CodeUnauthorized, Terminal, "a request carried no valid bearer token"},
	{CodeForbidden, Terminal, "the credential is valid but its role or tenant does not allow this request (a role that may only look), or a browser action came without its session's CSRF token"},
	{CodeWorkerLive, Terminal, "a worker start or stop named a worker whose session is live on the engine: only the process attending it can end it (a start or stop from elsewhere would hand back claims it does not hold)"},
	{CodeRateLimited, RetryAfter, "the callee asked to be called again later"},
	{CodeOverloaded, RetryAfter, "the callee is overloaded and named when to come back"},
	{CodeDraining, Retryable, "the process is shutting down"},
	{CodeDriverUnavailable, Terminal, "no database is configured or reachable for the chosen store"},
	{CodeStoreUnavailable, Retryable, "the store failed or could not be reached"},
	{CodeCommitUnknown, Retryable, "a commit was sent and its outcome is unknown (the connection was lost)"},
	{CodeInvariant, Terminal, "an internal invariant does not hold; a bug"},
	{CodeInternal, Retryable, "an unexpected internal error"},
	{CodeLeaseInvalid, Terminal, "a worker write or renewal presented no lease token, or one not issued for that run, fence and worker"},
	{CodeHistoryStale, Terminal, "a worker's record names an after_seq that is not the run's last seq: it was built on a history the engine no longer holds"},
	{CodeJobUndeclared, Terminal, "no worker has declared a job of that name (or it is not declared on that queue)"},
	{CodeQueueUndeclared, Terminal, "a worker polled or declared a queue that its manifest does not hold"},
	{CodeRouteNotFound, Terminal, "no API route has that path"},
	{CodeMethodNotAllowed, Terminal, "the API route exists but not for that method"},
	{CodeListenFailed, Terminal, "the server could not listen on its address (in use, or not this machine's)"},
	{CodeScheduleNotFound, Terminal, "no schedule of that name is declared to the scheduler"},
	{CodeScheduleNotLeader, Retryable, "this scheduler no longer holds the leader lease; the fire was refused and changed nothing"},
	{CodeScheduleConflict, Retryable, "the schedule's watermark moved (another leader fired) or it was paused; the fire was refused and changed nothing"},
	{CodeNoScheduler, Terminal, "this engine runs no scheduler"},
	{CodeRunCancelled, Terminal, "the run a caller waited for (WaitResult) was cancelled"},
	{CodeBackfillStalled, Terminal, "a backfill's source ran out while its count still matches rows: the two predicates disagree, which no retry fixes"},
	{CodeBackfillEnvironment, Terminal, "a backfill was asked to run in an environment its declaration does not list"},
	{CodeBackfillMigrationPending, Retryable, "a backfill requires a migration the application's migrations ledger does not show as applied yet"},
	{CodeBackfillApplied, Terminal, "a backfill already completed under this name; sweeping again needs force, into a new ledger row"},
	{CodeBackfillPending, Terminal, "declared backfills have not been swept in this environment (pending or failed)"},
	{CodeBackfillLive, Terminal, "another pass of this backfill (for this tenant) is live, enqueued under another key; one pass sweeps at a time, and this one swept nothing"},
	{CodeOutboxNoTx, Terminal, "an outbox in required mode was asked to enqueue with no transaction in reach"},
	{CodeChildFailed, Terminal, "a child run the run waited for failed or was cancelled; the outcome is recorded, so a retry of the parent sees it again"},
	{CodeNotChild, Terminal, "a run asked to wait for a run that is not its child"},
	{CodeJobTenantMismatch, Terminal, "a run's tenant is not the one its job derives from its input, or it names a tenant for a job declared NoTenant: refused at enqueue when the manifest says the job has no tenant, otherwise before the body runs"},
	{CodeKeyTaken, Terminal, "an enqueue's dedupe id names a run of another tenant (dedupe ids are one namespace across tenants), and another tenant's run is never handed back as the caller's; idempotency keys are held per (job, tenant, key) and never refuse an enqueue"},
	{CodeActorInvalid, Terminal, "an enqueue's actor id is empty, too long, not UTF-8 or holds a control character, or the actor names a tenant the job does not derive from the input (an actor is attribution, never tenancy)"},
	{CodeStoreLocked, Terminal, "the SQLite database is already open by another engine (its lock file is held); one engine per file, or use Postgres for many"},
	{CodeEngineUnreachable, Retryable, "the engine's API could not be reached (nothing listens at the address, or the connection failed)"},
}

// Codes returns the registry: every engine code with its class and meaning, in a stable order.
func Codes() []CodeInfo {
	out := make([]CodeInfo, len(codeTable))
	copy(out, codeTable)
	return out
}
