package systems

import "context"

// Section 9: bulk enqueue against River's InsertMany, transactional enqueue against a plain
// INSERT in the caller's transaction, and the outbox relay.
const (
	ScenarioBulk = "bulk" // n no-op jobs inserted in one call (one transaction); the clock stops at commit

	ScenarioTxPlain   = "tx-plain"   // callers' transactions: an app row and one more plain row
	ScenarioTxEnqueue = "tx-enqueue" // callers' transactions: an app row and EnqueueTx (same database)
	ScenarioTxStage   = "tx-stage"   // callers' transactions: an app row and an outbox row staged
	ScenarioRelay     = "relay"      // a relay publishing a staged backlog of n rows to the engine
)

// BulkInserter is implemented by systems with a bulk insert of jobs (ours, River). BulkInsert
// prepares (untimed) and returns the timed part: one call inserting n no-op jobs, verified by
// counting the rows written (Units).
type BulkInserter interface {
	BulkInsert(ctx context.Context, n int) (Measure, error)
}

// TxEnqueuer is implemented by our engine: `concurrency` callers each run transactions on an
// application table of the run's database, n transactions in all, each writing one application
// row and then, by scenario, one plain row (tx-plain), the run itself (tx-enqueue) or an outbox
// row (tx-stage); Relay stages n rows (untimed) and times a relay publishing them all.
type TxEnqueuer interface {
	TxEnqueue(ctx context.Context, scenario string, n, concurrency int) (Measure, error)
	Relay(ctx context.Context, n int) (Measure, error)
}
