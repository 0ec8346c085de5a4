package api

import (
	"context"
	"net/http"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/inputcheck"
	"github.com/ultimat3/jobs/scheduler"
)

// Schedules returns every schedule declared to the engine's scheduler; X_NO_SCHEDULER when it
// runs none.
func (c *Client) Schedules(ctx context.Context) ([]scheduler.Info, error) {
	var out ScheduleList
	err := c.callJSON(ctx, http.MethodGet, "/v1/schedules", nil, nil, &out)
	return out.Schedules, err
}

// Schedule returns one schedule, or X_SCHEDULE_NOT_FOUND.
func (c *Client) Schedule(ctx context.Context, name string) (scheduler.Info, error) {
	var out scheduler.Info
	if err := inputcheck.ScheduleName(name); err != nil {
		return out, err
	}
	err := c.callJSON(ctx, http.MethodGet, "/v1/schedules/"+pathSegment(name), nil, nil, &out)
	return out, err
}

// PauseSchedule pauses a schedule: no occurrence fires until it is resumed.
func (c *Client) PauseSchedule(ctx context.Context, name string) (scheduler.Info, error) {
	var out scheduler.Info
	if err := inputcheck.ScheduleName(name); err != nil {
		return out, err
	}
	err := c.callJSON(ctx, http.MethodPost, "/v1/schedules/"+pathSegment(name)+"/pause", nil, struct{}{}, &out)
	return out, err
}

// ResumeSchedule resumes a schedule from its next occurrence (those of the pause are skipped).
func (c *Client) ResumeSchedule(ctx context.Context, name string) (scheduler.Info, error) {
	var out scheduler.Info
	if err := inputcheck.ScheduleName(name); err != nil {
		return out, err
	}
	err := c.callJSON(ctx, http.MethodPost, "/v1/schedules/"+pathSegment(name)+"/resume", nil, struct{}{}, &out)
	return out, err
}

// TriggerSchedule fires a schedule now, recorded as manual; its watermark does not move. A
// trigger whose answer was lost may have fired: check the schedule's runs before sending it again.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (jobs.EnqueueResult, error) {
	var out jobs.EnqueueResult
	if err := inputcheck.ScheduleName(name); err != nil {
		return out, err
	}
	err := c.callJSON(ctx, http.MethodPost, "/v1/schedules/"+pathSegment(name)+"/trigger", nil, struct{}{}, &out)
	return out, err
}
