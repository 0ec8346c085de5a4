package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/engine"
)

// knownKinds are the kinds of declaration the engine knows. A worker may declare others (they
// are shown as they are), so --kind is not held to these: only a kind outside them that nothing
// is declared under is taken for a typo.
var knownKinds = []string{jobs.DeclareJob, jobs.DeclareBackfill, jobs.DeclareSchedule}

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
			if kind != "" && len(v.Declarations) == 0 && !slices.Contains(knownKinds, kind) {
				return cli.Usage("--kind %q: nothing is declared of that kind; the engine knows %s", kind, strings.Join(knownKinds, ", "))
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return printManifest(cmd.OutOrStdout(), time.Now(), v, kind)
		}),
	}
	co.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&kind, "kind", "", "only declarations of this kind ("+strings.Join(knownKinds, ", ")+", or one a worker declares)")
	return cmd
}

func printManifest(w io.Writer, now time.Time, v engine.ManifestView, kind string) error {
	if len(v.Declarations) == 0 {
		if kind != "" {
			fmt.Fprintf(w, "no %s declarations\n", cell(kind, identWidth))
		} else {
			fmt.Fprintln(w, "no declarations")
		}
	} else {
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\t%s\n", cell(d.Kind, identWidth), cell(d.Name, identWidth), cell(d.Checksum, 0),
				d.Live, conflict, cell(orDash(strings.Join(ws, ",")), errorWidth), when(now, d.LastSeen))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(v.Workers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "WORKER\tQUEUES\tLIVE\tIN FLIGHT\tLAST SEEN")
	for _, wk := range v.Workers {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\n", cell(wk.ID, identWidth), cell(strings.Join(wk.Queues, ","), errorWidth), wk.Live, wk.InFlight,
			when(now, wk.LastSeen))
	}
	return tw.Flush()
}
