package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/engine"
)

// newRetentionCmd runs the engine's retention sweep now, or says what it would delete. The
// periods are the served engine's (--retention, --retention-failed on serve): one place decides
// what goes.
func newRetentionCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "retention", Short: "Delete finished runs past their retention period (or see which would go)"}
	var co clientOptions
	var dryRun, asJSON bool
	run := &cobra.Command{
		Use:   "run [--dry-run]",
		Short: "Sweep now, as the engine's sweeper does; --dry-run only lists what would be deleted",
		Long: "Deletes, in batches, the completed and cancelled runs finished longer ago than the engine's\n" +
			"--retention, and the dead letters older than its --retention-failed, with their histories\n" +
			"(archived first when the engine has --retention-archive). Live and blocked runs, and runs a\n" +
			"dedupe id inside its window names, are never deleted. A sweep needs an admin credential; a\n" +
			"dry run a viewer's.",
		Args: cobra.NoArgs,
		RunE: co.withClient(func(cmd *cobra.Command, _ []string, c *api.Client) error {
			rep, err := c.Retention(cmd.Context(), dryRun)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			printRetention(cmd.OutOrStdout(), rep)
			return nil
		}),
	}
	co.flags(run)
	run.Flags().BoolVar(&dryRun, "dry-run", false, "delete nothing: say what a sweep would delete now")
	run.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(run)
	return cmd
}

func printRetention(w io.Writer, rep engine.RetentionReport) {
	cut := func(t *time.Time) string {
		if t == nil {
			return "kept"
		}
		return "before " + t.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "completed and cancelled: %s; failed: %s\n", cut(rep.CompletedBefore), cut(rep.FailedBefore))
	verb := "deleted"
	if rep.DryRun {
		verb = "would delete"
	}
	more := ""
	if rep.More {
		more = " (and more: the sweep stopped at its bound)"
	}
	var states []string
	for st, n := range rep.ByState {
		states = append(states, cell(st, 0)+" "+strconv.Itoa(n))
	}
	sort.Strings(states)
	detail := ""
	if len(states) > 0 {
		detail = " (" + strings.Join(states, ", ") + ")"
	}
	fmt.Fprintf(w, "%s %d run(s)%s%s\n", verb, rep.Runs, detail, more)
	if !rep.DryRun && rep.Runs > 0 {
		fmt.Fprintf(w, "%d history event(s), %d archived, %d batch(es), in %s\n", rep.Events, rep.Archived, rep.Batches, rep.Duration.Round(time.Millisecond))
	}
	if len(rep.Oldest) > 0 {
		tw := newTable(w)
		fmt.Fprintln(tw, "RUN\tJOB\tSTATE\tFINISHED")
		for _, r := range rep.Oldest {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(r.ID, 0), cell(r.Job, identWidth), cell(string(r.State), 0), r.FinishedAt.UTC().Format(time.RFC3339))
		}
		_ = tw.Flush()
	}
}

// retentionFlags are serve's retention options.
type retentionFlags struct {
	completed, failed, archive string
}

func (o *retentionFlags) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.completed, "retention", cli.Env("JOBS_RETENTION", "7d"),
		"how long completed and cancelled runs and their histories are kept after they finished (e.g. 7d, 36h; off: forever) [$JOBS_RETENTION]")
	f.StringVar(&o.failed, "retention-failed", cli.Env("JOBS_RETENTION_FAILED", "30d"),
		"how long dead letters are kept for an operator to retry (off: until retried) [$JOBS_RETENTION_FAILED]")
	f.StringVar(&o.archive, "retention-archive", cli.Env("JOBS_RETENTION_ARCHIVE", ""),
		"write each run as <DIR>/<run id>.jsonl (the history dump format), fsynced, before deleting it [$JOBS_RETENTION_ARCHIVE]")
}

// config turns the flags into the engine's RetentionConfig, but for its Archive: openArchive
// creates the archive's directory, which serve does only once every other flag was accepted.
func (o *retentionFlags) config() (engine.RetentionConfig, error) {
	var c engine.RetentionConfig
	var err error
	if c.Completed, err = retentionPeriod("--retention", o.completed); err != nil {
		return c, err
	}
	if c.Failed, err = retentionPeriod("--retention-failed", o.failed); err != nil {
		return c, err
	}
	return c, nil
}

// openArchive returns --retention-archive's archive, creating its directory; nil without one.
func (o *retentionFlags) openArchive() (engine.Archive, error) {
	if o.archive == "" {
		return nil, nil
	}
	a, err := engine.DirArchive(o.archive)
	if err != nil {
		return nil, cli.Usage("--retention-archive %q: %v", o.archive, err)
	}
	return a, nil
}

// retentionPeriod parses a period: a Go duration, a whole number of days ("7d"), or "off"
// (forever, engine.RetentionConfig's negative).
func retentionPeriod(flag, v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "off" || v == "forever" {
		return -1, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 36500 {
			return 0, cli.Usage("%s %q: want a duration (7d, 36h) or off", flag, v)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, cli.Usage("%s %q: want a duration (7d, 36h) or off", flag, v)
		}
	}
	if d < time.Hour {
		return 0, cli.Usage("%s %s: want at least 1h (off keeps runs forever)", flag, v)
	}
	return d, nil
}
