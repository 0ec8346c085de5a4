package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
)

// newOverviewCmd prints the overview the /_x console shows: every queue's depth, oldest ready
// age, dead letters and recent throughput (engine.InspectOverview).
func newOverviewCmd() *cobra.Command {
	var co clientOptions
	var asJSON bool
	var window, bucket time.Duration
	cmd := &cobra.Command{
		Use:   "overview",
		Short: "Every queue's depth, oldest ready age, dead letters and runs finished per minute",
		Args:  cobra.NoArgs,
		RunE: co.withClient(func(cmd *cobra.Command, _ []string, c *api.Client) error {
			// Checked here, not left to the engine: the client leaves out a zero or negative
			// duration, which the engine then reads as its default.
			for _, f := range []struct {
				name string
				d    time.Duration
			}{{"--window", window}, {"--bucket", bucket}} {
				if f.d <= 0 {
					return cli.Usage("%s %s: want a positive duration such as 15m", f.name, f.d)
				}
			}
			if bucket > window {
				return cli.Usage("--bucket %s is wider than --window %s", bucket, window)
			}
			ov, err := c.Overview(cmd.Context(), window, bucket)
			if jobs.CodeOf(err) == jobs.CodeBadRequest {
				// The engine bounds the number of buckets: its refusal is of these flags alone.
				return cli.Usage("--window %s, --bucket %s: %s", window, bucket, strings.TrimPrefix(err.Error(), string(jobs.CodeBadRequest)+": "))
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), ov)
			}
			if len(ov.Queues) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no queues")
				return nil
			}
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "QUEUE\tREADY\tDELAYED\tRUNNING\tSUSPENDED\tBLOCKED\tDEAD\tOLDEST READY\tFINISHED/MIN\tFINISHED (OLDEST → NEWEST)")
			for _, q := range ov.Queues {
				oldest := "-"
				if q.Counts[store.StateReady] > 0 {
					oldest = (time.Duration(q.OldestReadySeconds) * time.Second).String()
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.1f\t%s\n", cell(q.Queue, identWidth), q.Counts[store.StateReady],
					q.Counts[store.StateDelayed], q.Running, q.Counts[store.StateSuspended], q.Counts[store.StateBlocked],
					q.Dead, oldest, q.PerMinute, buckets(q.Finished))
			}
			return tw.Flush()
		}),
	}
	co.flags(cmd)
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.DurationVar(&window, "window", engine.ThroughputWindow, "how far back throughput is counted")
	f.DurationVar(&bucket, "bucket", engine.ThroughputBucket, "the width of each throughput bucket")
	return cmd
}

// buckets prints finished counts per bucket compactly: "0 0 3 12 7".
func buckets(bs []engine.FinishedBucket) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprint(b.Total())
	}
	return strings.Join(parts, " ")
}
