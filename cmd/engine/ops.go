package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/api/paging"
	"github.com/ultimat3/jobs/backfill"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// clientOptions reach a running engine.
type clientOptions struct {
	server  string
	token   string
	timeout time.Duration
}

// flags adds the connection flags as persistent flags, so a group's subcommands share them.
func (o *clientOptions) flags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.server, "server", cli.Env("JOBS_SERVER", "http://"+api.DefaultAddr), "the engine's API [$JOBS_SERVER]")
	f.StringVar(&o.token, "token", cli.Env("JOBS_TOKEN", ""), "bearer token [$JOBS_TOKEN]")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound of each call to the engine")
}

// withClient adapts a command body that needs the API client: it opens the client from the
// flags, runs the body and closes the client.
func (o *clientOptions) withClient(run func(cmd *cobra.Command, args []string, c *api.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := o.client()
		if err != nil {
			return err
		}
		defer c.Close()
		return run(cmd, args, c)
	}
}

func (o *clientOptions) client() (*api.Client, error) {
	if o.timeout <= 0 {
		// The client would quietly take its default for it.
		return nil, cli.Usage("--timeout %s: want a positive duration such as 30s", o.timeout)
	}
	return cli.NewClient(o.server, o.token, api.WithTimeout(o.timeout))
}

// listOptions are a listing's filters.
type listOptions struct {
	queue, state, job, tenant, before string
	limit                             int
	json                              bool
}

func (o *listOptions) flags(cmd *cobra.Command, withState bool) {
	f := cmd.Flags()
	f.StringVar(&o.queue, "queue", "", "only runs of this queue")
	if withState {
		f.StringVar(&o.state, "state", "", "only runs in this state ("+states()+")")
	}
	f.StringVar(&o.job, "job", "", "only runs of this job")
	f.StringVar(&o.tenant, "tenant", "", "only runs of this tenant")
	f.StringVar(&o.before, "before", "", "the page after this run id (the previous page's \"more\")")
	f.IntVar(&o.limit, "limit", 20, fmt.Sprintf("runs per page (1-%d)", engine.MaxSearchPage))
	f.BoolVar(&o.json, "json", false, "print JSON")
}

func states() string {
	s := make([]string, len(store.States))
	for i, st := range store.States {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

func (o *listOptions) params() (store.ListParams, error) {
	if o.state != "" && !slices.Contains(store.States, store.State(o.state)) {
		return store.ListParams{}, cli.Usage("--state %q: want one of %s", o.state, states())
	}
	if o.limit < 1 || o.limit > engine.MaxSearchPage {
		return store.ListParams{}, cli.Usage("--limit %d: want 1 to %d", o.limit, engine.MaxSearchPage)
	}
	if paging.Cursor(o.before) != nil {
		return store.ListParams{}, cli.Usage("--before %q is not a run id: pass the \"more: --before\" of the previous page", o.before)
	}
	return store.ListParams{Queue: o.queue, State: store.State(o.state), Job: o.job, Tenant: o.tenant,
		Before: o.before, Limit: o.limit}, nil
}

// oneArg is cobra.ExactArgs(1) that also refuses an empty argument, naming what it should be: a
// script's unset variable (`jobs show "$ID"`) would otherwise reach the engine as a path it does
// not serve, or as a request that names nothing.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(1)(cmd, args); err != nil {
			return err
		}
		if strings.TrimSpace(args[0]) == "" {
			return cli.Usage("the %s is empty", what)
		}
		return nil
	}
}

// forbidden reports whether the engine refused a call with X_FORBIDDEN.
func forbidden(err error) bool { return jobs.CodeOf(err) == jobs.CodeForbidden }

// noteLeftOut says, in one line on stderr, which sections spanning every tenant a command left
// out because the engine refused them (a tenant-scoped credential reads its tenant's runs and
// nothing fleet-wide), and the engine's refusal. On stderr, so --json's stdout stays the
// document alone.
func noteLeftOut(w io.Writer, sections []string, why error) {
	fmt.Fprintf(w, "note: left out %s (%s)\n", strings.Join(sections, " and "), cell(oneLine(why.Error()), 0))
}

// orEmpty is s, or an empty slice for nil: a listing's --json prints [] for none, never null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// whoami is the default attribution of an operator's action.
func whoami() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

func newJobsCmd() *cobra.Command {
	var co clientOptions
	cmd := &cobra.Command{Use: "jobs", Short: "List, inspect, enqueue, cancel and retry runs"}
	co.flags(cmd)
	cmd.AddCommand(jobsLsCmd(&co), jobsShowCmd(&co), jobsCancelCmd(&co), jobsRetryCmd(&co), jobsEnqueueCmd(&co))
	return cmd
}

func jobsLsCmd(co *clientOptions) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "Queue depths and runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := o.params()
			if err != nil {
				return err
			}
			c, err := co.client()
			if err != nil {
				return err
			}
			defer c.Close()
			// The runs first: a credential that may not read them fails on that refusal. The
			// queues and the backfills in flight span every tenant, so a tenant-scoped
			// credential is refused them, and they are left out rather than the whole listing.
			page, err := c.ListRuns(cmd.Context(), p)
			if err != nil {
				return err
			}
			var leftOut []string
			var why error
			refused := func(section string, err error) bool {
				if forbidden(err) {
					leftOut = append(leftOut, section)
					why = cmp.Or(why, err)
					return true
				}
				return false
			}
			qs, err := c.Queues(cmd.Context())
			queuesLeftOut := refused("the queues", err)
			if err != nil && !queuesLeftOut {
				return err
			}
			if o.queue != "" {
				qs = slices.DeleteFunc(qs, func(q engine.QueueView) bool { return q.Queue != o.queue })
			}
			inFlight, err := c.Backfills(cmd.Context(), store.BackfillFilter{Status: backfill.StatusRunning})
			backfillsLeftOut := refused("the backfills in flight", err)
			if err != nil && !backfillsLeftOut {
				return err
			}
			if len(leftOut) > 0 {
				noteLeftOut(cmd.ErrOrStderr(), leftOut, why)
			}
			out := cmd.OutOrStdout()
			if o.json {
				// A section left out is absent from the document; one the engine answered is
				// there, [] when empty.
				doc := struct {
					Queues    *[]engine.QueueView  `json:"queues,omitempty"`
					Backfills *[]backfill.Progress `json:"backfills,omitempty"`
					Runs      []engine.RunSummary  `json:"runs"`
					Next      string               `json:"next,omitempty"`
				}{Runs: page.Runs, Next: page.Next}
				if !queuesLeftOut {
					qs = orEmpty(qs)
					doc.Queues = &qs
				}
				if !backfillsLeftOut {
					inFlight = orEmpty(inFlight)
					doc.Backfills = &inFlight
				}
				return printJSON(out, doc)
			}
			if len(qs) > 0 {
				if err := printQueues(out, qs); err != nil {
					return err
				}
				fmt.Fprintln(out)
			}
			if len(inFlight) > 0 {
				if err := printBackfills(out, time.Now(), inFlight); err != nil {
					return err
				}
				fmt.Fprintln(out)
			}
			return printRuns(out, time.Now(), page)
		},
	}
	o.flags(cmd, true)
	return cmd
}

func jobsShowCmd(co *clientOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "A run with its per-step trace, failed attempts and retries",
		Args:  oneArg("run id"),
		RunE: co.withClient(func(cmd *cobra.Command, args []string, c *api.Client) error {
			v, err := c.GetRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			// The backfill ledger spans every tenant: a tenant-scoped credential is refused it,
			// and the run is shown without its ledger row (null in --json).
			bf, err := runBackfill(cmd.Context(), c, args[0])
			switch {
			case forbidden(err):
				noteLeftOut(cmd.ErrOrStderr(), []string{"the backfill ledger row"}, err)
			case err != nil:
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), struct {
					engine.RunView
					Backfill *backfill.Progress `json:"backfill"`
				}{v, bf})
			}
			if err := printRun(cmd.OutOrStdout(), time.Now(), v); err != nil {
				return err
			}
			return printRunBackfill(cmd.OutOrStdout(), bf)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func jobsCancelCmd(co *clientOptions) *cobra.Command {
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a run: at once when queued or suspended, at its next heartbeat when running",
		Args:  oneArg("run id"),
		RunE: co.withClient(func(cmd *cobra.Command, args []string, c *api.Client) error {
			s, err := c.Cancel(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cancelled run %s (%s)\n", cell(s.ID, 0), cell(s.Job, 0))
			return nil
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the run's history")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func jobsRetryCmd(co *clientOptions) *cobra.Command {
	var fromStep, reason, by string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "retry ID",
		Short: "Reopen a dead-lettered or blocked run, from a step with --from-step",
		Args:  oneArg("run id"),
		RunE: co.withClient(func(cmd *cobra.Command, args []string, c *api.Client) error {
			s, err := c.Retry(cmd.Context(), engine.RetryRequest{RunID: args[0], FromStep: fromStep, By: by, Reason: reason})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), s)
			}
			from := ""
			if fromStep != "" {
				from = " from step " + cell(fromStep, 0)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "retried run %s (%s)%s: %s\n", cell(s.ID, 0), cell(s.Job, 0), from, cell(string(s.State), 0))
			return nil
		}),
	}
	cmd.Flags().StringVar(&fromStep, "from-step", "", "re-run from this step on (its recorded result and later ones are discarded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit trail")
	cmd.Flags().StringVar(&by, "by", whoami(), "who, for the audit trail")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func jobsEnqueueCmd(co *clientOptions) *cobra.Command {
	var input, key, tenant, queue, by, traceparent string
	var noTenant, asJSON bool
	var delay time.Duration
	var priority int
	cmd := &cobra.Command{
		Use:   "enqueue NAME --input JSON --key K (--tenant T | --no-tenant)",
		Short: "Start a run of a job by name",
		Long: "Starts a run, or finds the live run holding the same key. An enqueue by name cannot derive\n" +
			"the idempotency key or the tenant from the input, so both are required: --key, and\n" +
			"--tenant or --no-tenant.",
		Args: oneArg("job name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return cli.UsageCode(jobs.CodeJobIdempotencyRequired, "name the run's idempotency key with --key")
			}
			if (tenant == "") == !noTenant {
				return cli.UsageCode(jobs.CodeJobTenantRequired, "name the run's tenant with --tenant T, or --no-tenant (exactly one)")
			}
			if !cmd.Flags().Changed("input") {
				return cli.Usage("give the job's input with --input JSON (--input null for a job that takes none): an enqueue without one is refused rather than guessed")
			}
			in, err := jobs.FromJSON([]byte(input))
			if err != nil {
				return cli.Usage("--input is not JSON: %s", strings.TrimPrefix(err.Error(), string(jobs.CodeBadRequest)+": "))
			}
			// The engine's own bounds (EnqueueRequest.Validate), checked before the call so that
			// a wrong flag is a usage error like the others.
			if delay < 0 || delay > jobs.WakeHorizon {
				return cli.Usage("--delay %s: want 0 (now) or a positive duration up to %s (100 years)", delay, jobs.WakeHorizon)
			}
			if priority < jobs.MinPriority || priority > jobs.MaxPriority {
				return cli.Usage("--priority %d: want %d to %d", priority, jobs.MinPriority, jobs.MaxPriority)
			}
			c, err := co.client()
			if err != nil {
				return err
			}
			defer c.Close()
			// A script running inside a traced job hands its trace on, as OpenTelemetry's
			// environment carriers do; a malformed value is ignored like a malformed header.
			ctx := jobs.ContextWithTrace(cmd.Context(), traceparent, os.Getenv("TRACESTATE"))
			res, err := c.Enqueue(ctx, jobs.EnqueueRequest{Job: args[0], Queue: queue, Input: in, Key: key,
				Tenant: tenant, NoTenant: noTenant, EnqueuedBy: by, Delay: delay, Priority: priority})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			if res.Deduped {
				fmt.Fprintf(cmd.OutOrStdout(), "run %s already holds key %q (deduped)\n", cell(res.RunID, 0), key)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "enqueued run %s\n", cell(res.RunID, 0))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&input, "input", "", "the job's input as JSON (required; null for none)")
	f.StringVar(&key, "key", "", "idempotency key: a live run holding it is returned instead")
	f.StringVar(&tenant, "tenant", "", "the tenant the run acts for")
	f.BoolVar(&noTenant, "no-tenant", false, "the run acts for no tenant")
	f.StringVar(&queue, "queue", "", "queue (default: \"default\"; a typed job's is in its definition)")
	f.DurationVar(&delay, "delay", 0, "start the run after this long")
	f.IntVar(&priority, "priority", 0, fmt.Sprintf("order within the queue, %d to %d: each level is a %s head start", jobs.MinPriority, jobs.MaxPriority, jobs.PriorityStep))
	f.StringVar(&by, "by", whoami(), "who enqueued it (attribution, never authority)")
	f.StringVar(&traceparent, "traceparent", os.Getenv("TRACEPARENT"), "W3C traceparent the run joins (default $TRACEPARENT)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newEventsCmd() *cobra.Command {
	var co clientOptions
	cmd := &cobra.Command{Use: "events", Short: "Publish events to the runs waiting for them"}
	co.flags(cmd)
	var payload, match string
	var asJSON bool
	pub := &cobra.Command{
		Use:   "publish NAME --payload JSON",
		Short: "Publish an event; runs waiting for it whose match its fields equal receive it",
		Args:  oneArg("event name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("payload") {
				return cli.Usage("give the event's payload with --payload JSON (--payload null for none): waits match on its fields, so a publish without one is refused rather than guessed")
			}
			p, err := jobs.FromJSON([]byte(payload))
			if err != nil {
				return cli.Usage("--payload is not JSON: %s", strings.TrimPrefix(err.Error(), string(jobs.CodeBadRequest)+": "))
			}
			c, err := co.client()
			if err != nil {
				return err
			}
			defer c.Close()
			req := jobs.PublishRequest{Event: args[0], Payload: p}
			if cmd.Flags().Changed("match") {
				if req.Match, err = matchFlag(match); err != nil {
					return err
				}
			}
			res, err := c.PublishMatched(cmd.Context(), req)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "published %s as %s: delivered to %d waiting run(s)\n", cell(args[0], 0), cell(res.EventID, 0), res.Delivered)
			return nil
		},
	}
	pub.Flags().StringVar(&payload, "payload", "", "the event's payload as JSON (required; null for none)")
	pub.Flags().StringVar(&match, "match", "", `the fields waits match on, as a JSON object ({"orderId":"o-1"}); default: the payload's own`)
	pub.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(pub)
	return cmd
}

func newHistoryCmd() *cobra.Command {
	var co clientOptions
	cmd := &cobra.Command{Use: "history", Short: "Read a run's event history"}
	co.flags(cmd)
	var format string
	var asJSON bool
	dump := &cobra.Command{
		Use:   "dump ID",
		Short: "Print a run's history: JSON lines that history.Load reads and replay.Check replays",
		Long: "Prints the run's history. The default, jsonl, is the dump format: save it under a\n" +
			"testdata/ folder and replay it against the current code (replay.CheckFile) to catch a\n" +
			"deploy that would no longer replay runs in flight. table is for people; json is one array.",
		Args: oneArg("run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				// --json, as on every listing: one JSON array (the same as --format json).
				if cmd.Flags().Changed("format") && format != "json" {
					return cli.Usage("--json and --format %s disagree: --json is --format json", format)
				}
				format = "json"
			}
			if format != "jsonl" && format != "table" && format != "json" {
				return cli.Usage("--format %q: want jsonl, json or table", format)
			}
			c, err := co.client()
			if err != nil {
				return err
			}
			defer c.Close()
			out := cmd.OutOrStdout()
			// jsonl and json are streamed to stdout as the dump arrives: a long run's history
			// is never held here. A failure part way returns its coded error (exit non-zero,
			// the error on stderr) after what arrived was printed: the output is whole only
			// when the command succeeds.
			switch format {
			case "jsonl":
				return c.DumpHistory(cmd.Context(), args[0], out)
			case "json":
				arr := &jsonArrayWriter{w: out}
				if err := c.DumpHistory(cmd.Context(), args[0], arr); err != nil {
					return err
				}
				return arr.close()
			}
			// The table is the one format held whole: it is built from the loaded events
			// (history.Load), and its columns are aligned over every row (tabwriter).
			var buf bytes.Buffer
			if err := c.DumpHistory(cmd.Context(), args[0], &buf); err != nil {
				return err
			}
			events, err := history.Load(&buf)
			if err != nil {
				return jobs.Wrap(jobs.CodeEncoding, err, "read the dump")
			}
			if v, err := c.GetRun(cmd.Context(), args[0]); err == nil {
				printFamily(out, v)
			}
			return history.Table(out, events)
		},
	}
	dump.Flags().StringVar(&format, "format", "jsonl", "jsonl, json or table")
	dump.Flags().BoolVar(&asJSON, "json", false, "print one JSON array (--format json)")
	cmd.AddCommand(dump)
	return cmd
}

// jsonArrayWriter turns the JSON lines of a dump written to it into the array printJSON prints
// of the same lines (two-space indent), a line at a time: it holds one line, not the dump.
type jsonArrayWriter struct {
	w    io.Writer
	line []byte // the line being written, up to its newline
	n    int    // lines printed
	err  error
}

func (a *jsonArrayWriter) Write(p []byte) (int, error) {
	if a.err != nil {
		return 0, a.err
	}
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			a.line = append(a.line, rest...)
			break
		}
		a.line = append(a.line, rest[:i]...)
		rest = rest[i+1:]
		if a.err = a.element(); a.err != nil {
			return 0, a.err
		}
	}
	return len(p), nil
}

// element prints the line held as the array's next element.
func (a *jsonArrayWriter) element() error {
	line := bytes.TrimSpace(a.line)
	a.line = a.line[:0]
	if len(line) == 0 {
		return nil
	}
	var out bytes.Buffer
	if a.n == 0 {
		out.WriteString("[\n  ")
	} else {
		out.WriteString(",\n  ")
	}
	if err := json.Indent(&out, line, "  ", "  "); err != nil {
		return jobs.Wrap(jobs.CodeEncoding, err, "read the dump: line %d", a.n+1)
	}
	a.n++
	_, err := a.w.Write(out.Bytes())
	return err
}

// close prints a last line without a newline, and the array's end.
func (a *jsonArrayWriter) close() error {
	if a.err != nil {
		return a.err
	}
	if err := a.element(); err != nil {
		return err
	}
	end := "\n]\n"
	if a.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(a.w, end)
	return err
}

func newDeadLettersCmd() *cobra.Command {
	var co clientOptions
	var o listOptions
	var full bool
	cmd := &cobra.Command{
		Use:   "dead-letters",
		Short: "Dead-lettered runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := o.params()
			if err != nil {
				return err
			}
			c, err := co.client()
			if err != nil {
				return err
			}
			defer c.Close()
			page, err := c.DeadLetters(cmd.Context(), p)
			if err != nil {
				return err
			}
			if o.json {
				return printJSON(cmd.OutOrStdout(), page)
			}
			return printDeadLetters(cmd.OutOrStdout(), time.Now(), page, full)
		},
	}
	co.flags(cmd)
	o.flags(cmd, false)
	cmd.Flags().BoolVar(&full, "full", false, fmt.Sprintf("print each cell whole (the table clips an error at %d characters and a job, queue or stop reason at %d; --json and jobs show ID print them whole too)", errorWidth, identWidth))
	return cmd
}

func newCodesCmd() *cobra.Command {
	var co clientOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "codes",
		Short: "Every X_ code the engine raises, with its retry class and meaning",
		Args:  cobra.NoArgs,
		RunE: co.withClient(func(cmd *cobra.Command, _ []string, c *api.Client) error {
			codes, err := c.Codes(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), api.CodeList{Codes: codes})
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "CODE\tCLASS\tMEANING")
			for _, ci := range codes {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", cell(string(ci.Code), 0), cell(string(ci.Class), 0), cell(ci.Meaning, 0))
			}
			return tw.Flush()
		}),
	}
	co.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
