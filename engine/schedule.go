package engine

import (
	"context"

	"github.com/ultimat3/jobs/store"
)

// FireSchedule creates a schedule's runs and advances its watermark in one store transaction
// (store.Schedules.ScheduleFire: only while the caller leads and the watermark is where it read
// it), then wakes the pollers of the new runs. The runs come from PrepareRun.
func (e *Engine) FireSchedule(ctx context.Context, p store.ScheduleFireParams) ([]store.CreateRunResult, error) {
	res, err := e.store.ScheduleFire(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, r := range res {
		if !r.Deduped {
			e.matching.Wake()
			break
		}
	}
	return res, nil
}
