package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api/paging"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store"
)

// The tools' names.
const (
	ToolListRuns      = "list_runs"
	ToolInspectRun    = "inspect_run"
	ToolListQueues    = "list_queues"
	ToolDeadLetters   = "list_dead_letters"
	ToolManifest      = "inspect_manifest"
	ToolBackfills     = "list_backfills"
	ToolSchedules     = "list_schedules"
	ToolHistory       = "dump_history"
	ToolCancelRun     = "cancel_run"
	ToolRetryRun      = "retry_run"
	ToolRetryFromStep = "retry_from_step"
)

// actionTools change runs: served to operators and admins only.
var actionTools = map[string]bool{ToolCancelRun: true, ToolRetryRun: true, ToolRetryFromStep: true}

type tools struct {
	c client.Client
	o Options
}

// Inputs. A field without omitempty is required by the tool's schema.
type (
	// ListRunsInput filters and pages runs (client.Reader.SearchRuns).
	ListRunsInput struct {
		Queue  string `json:"queue,omitempty" jsonschema:"only runs on this queue"`
		State  string `json:"state,omitempty" jsonschema:"only runs in this state: ready, delayed, running, suspended, blocked, completed, failed or cancelled"`
		Job    string `json:"job,omitempty" jsonschema:"only runs of this job"`
		Tenant string `json:"tenant,omitempty" jsonschema:"only runs of this tenant"`
		Search string `json:"search,omitempty" jsonschema:"a run id or an idempotency key"`
		// Times are RFC 3339.
		CreatedFrom string `json:"created_from,omitempty" jsonschema:"only runs created at or after this RFC 3339 time"`
		CreatedTo   string `json:"created_to,omitempty" jsonschema:"only runs created before this RFC 3339 time"`
		Before      string `json:"before,omitempty" jsonschema:"the next cursor of the previous page"`
		// Limit is a pointer so that 0 is refused, as on the HTTP API, rather than read as the
		// default that leaving it out asks for (package paging).
		Limit *int `json:"limit,omitempty" jsonschema:"page size, 1 to 500; default 50"`
	}
	// RunInput names one run.
	RunInput struct {
		RunID string `json:"run_id" jsonschema:"the run's id"`
	}
	// DeadLettersInput filters and pages dead-lettered runs.
	DeadLettersInput struct {
		Queue  string `json:"queue,omitempty" jsonschema:"only runs on this queue"`
		Job    string `json:"job,omitempty" jsonschema:"only runs of this job"`
		Tenant string `json:"tenant,omitempty" jsonschema:"only runs of this tenant"`
		Before string `json:"before,omitempty" jsonschema:"the next cursor of the previous page"`
		Limit  *int   `json:"limit,omitempty" jsonschema:"page size, 1 to 500; default 50"`
	}
	// ManifestInput selects a kind of declaration.
	ManifestInput struct {
		Kind string `json:"kind,omitempty" jsonschema:"only declarations of this kind (job, backfill, schedule, …)"`
	}
	// BackfillsInput filters the backfill ledger.
	BackfillsInput struct {
		Name   string `json:"name,omitempty" jsonschema:"only passes of this backfill"`
		Status string `json:"status,omitempty" jsonschema:"running, completed or failed"`
		RunID  string `json:"run_id,omitempty" jsonschema:"only the pass of this run"`
		Tenant string `json:"tenant,omitempty" jsonschema:"only the passes of this tenant (a per-tenant backfill)"`
		Limit  *int   `json:"limit,omitempty" jsonschema:"at most this many rows, 1 to 10000"`
	}
	// SchedulesInput names one schedule, or none for all.
	SchedulesInput struct {
		Name string `json:"name,omitempty" jsonschema:"one schedule's name; empty lists every schedule"`
	}
	// CancelInput cancels a run.
	CancelInput struct {
		RunID  string `json:"run_id" jsonschema:"the run's id"`
		Reason string `json:"reason,omitempty" jsonschema:"why, recorded in the run's history"`
	}
	// RetryInput reopens a dead-lettered or blocked run where it stopped.
	RetryInput struct {
		RunID  string `json:"run_id" jsonschema:"the run's id"`
		By     string `json:"by,omitempty" jsonschema:"who retries, recorded in the history; default the server's actor"`
		Reason string `json:"reason,omitempty" jsonschema:"why, recorded in the run's history"`
	}
	// RetryFromStepInput re-runs a run from a recorded step on.
	RetryFromStepInput struct {
		RunID  string `json:"run_id" jsonschema:"the run's id"`
		Step   string `json:"step" jsonschema:"the step to re-run from (completed, or failed and gone past by the body); the steps before it keep their results"`
		By     string `json:"by,omitempty" jsonschema:"who retries, recorded in the history; default the server's actor"`
		Reason string `json:"reason,omitempty" jsonschema:"why, recorded in the run's history"`
	}
)

// Outputs that wrap a list, so every structured result is a JSON object.
type (
	// QueuesOutput is list_queues' answer.
	QueuesOutput struct {
		Queues []engine.QueueView `json:"queues"`
	}
	// BackfillsOutput is list_backfills' answer.
	BackfillsOutput struct {
		Backfills []backfill.Progress `json:"backfills"`
	}
	// SchedulesOutput is list_schedules' answer.
	SchedulesOutput struct {
		Schedules []scheduler.Info `json:"schedules"`
	}
	// HistoryOutput is dump_history's structured answer; its text is the dump itself.
	HistoryOutput struct {
		RunID  string            `json:"runId"`
		Events []json.RawMessage `json:"events"`
	}
)

func readOnly(title string) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true}
}

func acting(title string, destructive bool) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{Title: title, DestructiveHint: &destructive}
}

// add registers a tool whose body answers (value, error), wrapped in safely. An action tool is
// registered on a ReadWrite server only.
func add[In any](t *tools, s *sdk.Server, name, desc string, ann *sdk.ToolAnnotations, body func(ctx context.Context, in In) (any, error)) {
	if actionTools[name] && t.o.Access != ReadWrite {
		return // not listed; a call is refused by guard
	}
	sdk.AddTool(s, &sdk.Tool{Name: name, Description: desc, Annotations: ann},
		func(ctx context.Context, _ *sdk.CallToolRequest, in In) (*sdk.CallToolResult, any, error) {
			return t.safely(ctx, name, func() (any, error) { return body(ctx, in) })
		})
}

func (t *tools) register(s *sdk.Server) {
	add(t, s, ToolListRuns, "List runs, newest first, by queue, state, job, tenant, creation time, or a run id / idempotency key; one page at a time (pass next as before).",
		readOnly("List runs"), func(ctx context.Context, in ListRunsInput) (any, error) {
			f := engine.RunFilter{Queue: in.Queue, State: store.State(in.State), Job: in.Job, Tenant: in.Tenant,
				Search: in.Search, Before: in.Before}
			var err error
			if f.CreatedFrom, err = parseTime("created_from", in.CreatedFrom); err != nil {
				return nil, err
			}
			if f.CreatedTo, err = parseTime("created_to", in.CreatedTo); err != nil {
				return nil, err
			}
			if f.Limit, err = page(in.Before, in.Limit); err != nil {
				return nil, err
			}
			return t.c.SearchRuns(ctx, f)
		})
	add(t, s, ToolInspectRun, "Inspect a run: its state, input, result or error and stop reason, attempts, retries and its per-step trace (steps, sleeps, event waits).",
		readOnly("Inspect a run"), func(ctx context.Context, in RunInput) (any, error) {
			if err := required("run_id", in.RunID); err != nil {
				return nil, err
			}
			return t.c.GetRun(ctx, in.RunID)
		})
	add(t, s, ToolListQueues, "List every queue's depth by state, the age of its oldest ready run and its dead letters.",
		readOnly("List queues"), func(ctx context.Context, _ struct{}) (any, error) {
			qs, err := t.c.Queues(ctx)
			return QueuesOutput{Queues: qs}, err
		})
	add(t, s, ToolDeadLetters, "List dead-lettered runs (failed, retries exhausted), newest first, with their error.",
		readOnly("List dead letters"), func(ctx context.Context, in DeadLettersInput) (any, error) {
			limit, err := page(in.Before, in.Limit)
			if err != nil {
				return nil, err
			}
			return t.c.DeadLetters(ctx, store.ListParams{Queue: in.Queue, Job: in.Job, Tenant: in.Tenant, Before: in.Before, Limit: limit})
		})
	add(t, s, ToolManifest, "Inspect the fleet's manifest: what the workers declare (jobs, queues, backfills, schedules), who declares it, and every worker with when it was last heard from.",
		readOnly("Inspect the manifest"), func(ctx context.Context, in ManifestInput) (any, error) {
			return t.c.Manifest(ctx, in.Kind)
		})
	add(t, s, ToolBackfills, "List the backfill ledger: each pass with its status and progress, newest first.",
		readOnly("List backfills"), func(ctx context.Context, in BackfillsInput) (any, error) {
			limit, err := paging.LimitOf(in.Limit, 0, paging.MaxBackfills)
			if err != nil {
				return nil, err
			}
			bs, err := t.c.Backfills(ctx, store.BackfillFilter{Name: in.Name, Status: in.Status, RunID: in.RunID, Tenant: in.Tenant, Limit: limit})
			return BackfillsOutput{Backfills: bs}, err
		})
	add(t, s, ToolSchedules, "List the schedules (or one by name): cron, time zone, job, next fire, paused, last run.",
		readOnly("List schedules"), func(ctx context.Context, in SchedulesInput) (any, error) {
			if in.Name != "" {
				one, err := t.c.Schedule(ctx, in.Name)
				return SchedulesOutput{Schedules: []scheduler.Info{one}}, err
			}
			all, err := t.c.Schedules(ctx)
			return SchedulesOutput{Schedules: all}, err
		})
	sdk.AddTool(s, &sdk.Tool{Name: ToolHistory, Annotations: readOnly("Dump a run's history"),
		Description: "Dump a run's event history as JSON lines, the format `engine history dump` writes and replay tests load."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in RunInput) (*sdk.CallToolResult, any, error) {
			dump := boundedDump{runID: in.RunID}
			res, out, err := t.safely(ctx, ToolHistory, func() (any, error) {
				if err := required("run_id", in.RunID); err != nil {
					return nil, err
				}
				if err := t.c.DumpHistory(ctx, in.RunID, &dump); err != nil {
					return nil, err
				}
				o := HistoryOutput{RunID: in.RunID, Events: []json.RawMessage{}}
				for _, l := range bytes.Split(bytes.TrimSpace(dump.Bytes()), []byte{'\n'}) {
					if len(l) > 0 {
						o.Events = append(o.Events, json.RawMessage(l))
					}
				}
				return o, nil
			})
			if res == nil && err == nil {
				// The text is the dump itself, byte for byte; the structure holds the same events.
				res = &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: dump.String()}}}
			}
			return res, out, err
		})
	add(t, s, ToolCancelRun, "Cancel a run that has not finished. Operators only.",
		acting("Cancel a run", true), func(ctx context.Context, in CancelInput) (any, error) {
			if err := required("run_id", in.RunID); err != nil {
				return nil, err
			}
			return t.c.Cancel(ctx, in.RunID, in.Reason)
		})
	add(t, s, ToolRetryRun, "Retry a dead-lettered or blocked run where it stopped. Operators only.",
		acting("Retry a run", false), func(ctx context.Context, in RetryInput) (any, error) {
			if err := required("run_id", in.RunID); err != nil {
				return nil, err
			}
			return t.c.Retry(ctx, engine.RetryRequest{RunID: in.RunID, By: t.by(in.By), Reason: in.Reason})
		})
	add(t, s, ToolRetryFromStep, "Retry a dead-lettered or blocked run from a recorded step (completed, or failed and gone past by the body): the steps before it keep their results, the step and those after run again. Operators only.",
		acting("Retry a run from a step", false), func(ctx context.Context, in RetryFromStepInput) (any, error) {
			if err := required("run_id", in.RunID); err != nil {
				return nil, err
			}
			if err := required("step", in.Step); err != nil {
				return nil, err
			}
			return t.c.Retry(ctx, engine.RetryRequest{RunID: in.RunID, FromStep: in.Step, By: t.by(in.By), Reason: in.Reason})
		})
}

// MaxHistoryDump bounds the dump dump_history answers with. A tool's answer is one message, so
// the dump is held whole, and twice (the text, and the structured events), before it goes out;
// a long run's history is gigabytes. A larger dump is refused X_PAYLOAD_TOO_LARGE, as soon as
// it passes the bound (nothing more is read), naming `engine history dump`, which streams it.
const MaxHistoryDump = 4 << 20

// boundedDump holds a dump of at most MaxHistoryDump bytes.
type boundedDump struct {
	bytes.Buffer
	runID string
}

func (b *boundedDump) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxHistoryDump {
		return 0, jobs.Errorf(jobs.CodePayloadTooLarge,
			"the history of run %s is larger than the %d MiB %s answers: dump it with `engine history dump %s`, which streams it",
			b.runID, MaxHistoryDump>>20, ToolHistory, b.runID)
	}
	return b.Buffer.Write(p)
}

func (t *tools) by(who string) string {
	if who == "" {
		return t.o.Actor
	}
	return who
}

// page checks a run listing's cursor and page size by the rule the HTTP API and the console
// apply (package paging): the engine behind client.Local checks neither.
func page(before string, limit *int) (int, error) {
	if err := paging.Cursor(before); err != nil {
		return 0, err
	}
	return paging.LimitOf(limit, paging.Default, paging.Max)
}

func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return jobs.Errorf(jobs.CodeBadRequest, "%s is required", field)
	}
	return nil
}

func parseTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, jobs.Errorf(jobs.CodeBadRequest, "%s %q: want an RFC 3339 time such as 2026-01-05T09:00:00Z", field, v)
	}
	return t, nil
}
