package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
)

func newManifestCmd() *cobra.Command {
	var co clientOptions
	var asJSON bool
	var kind string
	cmd := &cobra.Command{
		Use:   "manifest",
		Short: "What the fleet's workers declared: jobs, backfills, schedules, with who declared them and when",
		Args:  cobra.NoArgs,
		RunE: co.withClient(func(cmd *cobra.Command, _ []string, c *api.Client) error {
			v, err := c.Manifest(cmd.Context(), kind)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return printManifest(cmd.OutOrStdout(), time.Now(), v)
		}),
	}
	co.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&kind, "kind", "", "only declarations of this kind (job, backfill, schedule, …)")
	return cmd
}

func printManifest(w io.Writer, now time.Time, v engine.ManifestView) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "KIND\tNAME\tCHECKSUM\tLIVE\tCONFLICT\tWORKERS\tLAST SEEN")
	for _, d := range v.Declarations {
		ws := make([]string, len(d.Workers))
		for i, by := range d.Workers {
			ws[i] = by.WorkerID
		}
		conflict := "-"
		if d.Conflict {
			conflict = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\t%s\n", d.Kind, d.Name, d.Checksum, d.Live, conflict, orDash(strings.Join(ws, ",")), when(now, d.LastSeen))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Workers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "WORKER\tQUEUES\tLIVE\tIN FLIGHT\tLAST SEEN")
	for _, wk := range v.Workers {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\n", wk.ID, strings.Join(wk.Queues, ","), wk.Live, wk.InFlight, when(now, wk.LastSeen))
	}
	return tw.Flush()
}
