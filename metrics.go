package jobs

// The counters both the engine and a worker export. An app that runs both in one process and
// serves one registry must get one family per name, so both sides register them with these names
// and help texts, and each labels its own series with source="engine" or source="worker".
const (
	MetricJobsTotal     = "jobs_total"
	MetricJobsTotalHelp = "Claims that ended, by queue and outcome (completed, failed = dead-lettered, retried, blocked, " +
		"cancelled): source=engine counts what the engine recorded, source=worker the final records each worker's engine took (a completion refused because the run was " +
		"cancelled counts cancelled)."
	MetricLeasesLost     = "job_leases_lost_total"
	MetricLeasesLostHelp = "Claims lost with the run still running: source=engine counts the runs the engine " +
		"reclaimed (a lapsed lease, or the claims of a worker released when its session dropped, it stopped, or a process " +
		"started again under its id), source=worker the claims a worker saw lost: no renewal landed for a whole window, or the engine refused a " +
		"renewal or the final record as no longer the worker's. " +
		"Either way the run may run twice."
	MetricClaimsHandedBack     = "jobs_claims_handed_back_total"
	MetricClaimsHandedBackHelp = "Claims handed back without spending an attempt because a limit was reached, by reason: " +
		"source=engine for the fleet caps (job_cap), source=worker for the process's LimitConfig (tenant_cap, tenant_rate, global_cap)."
)
