package engine

// QueuedRecords is how many records wait for a group commit.
func QueuedRecords(e *Engine) int { return len(e.commits) }
