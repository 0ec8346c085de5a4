package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/scheduler"
)

func newSchedulesCmd() *cobra.Command {
	var co clientOptions
	cmd := &cobra.Command{Use: "schedules", Short: "List, show, pause, resume and trigger cron schedules"}
	co.flags(cmd)
	cmd.AddCommand(schedulesLsCmd(&co), schedulesShowCmd(&co),
		scheduleActionCmd(&co, "pause", "Pause a schedule: nothing fires until it is resumed", (*api.Client).PauseSchedule),
		scheduleActionCmd(&co, "resume", "Resume a schedule from its next occurrence (those of the pause are skipped)", (*api.Client).ResumeSchedule),
		schedulesTriggerCmd(&co))
	return cmd
}

func schedulesLsCmd(co *clientOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "Every schedule: spec, zone, policy, last fire, next fires, paused",
		Args:  cobra.NoArgs,
		RunE: co.withClient(func(cmd *cobra.Command, _ []string, c *api.Client) error {
			all, err := c.Schedules(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), api.ScheduleList{Schedules: all})
			}
			return printSchedules(cmd.OutOrStdout(), time.Now(), all)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func schedulesShowCmd(co *clientOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "One schedule with its next five fires",
		Args:  oneArg("schedule name"),
		RunE: co.withClient(func(cmd *cobra.Command, args []string, c *api.Client) error {
			in, err := c.Schedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), in)
			}
			return printSchedule(cmd.OutOrStdout(), time.Now(), in)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func scheduleActionCmd(co *clientOptions, verb, short string, call func(*api.Client, context.Context, string) (scheduler.Info, error)) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  oneArg("schedule name"),
		RunE: co.withClient(func(cmd *cobra.Command, args []string, c *api.Client) error {
			in, err := call(c, cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), in)
			}
			state := "running"
			if in.Paused {
				state = "paused"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s is %s\n", cell(in.Name, 0), state)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func schedulesTriggerCmd(co *clientOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "trigger NAME",
		Short: "Fire a schedule now, recorded as manual; its next occurrence still fires",
		Args:  oneArg("schedule name"),
		RunE: co.withClient(func(cmd *cobra.Command, args []string, c *api.Client) error {
			res, err := c.TriggerSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "triggered %s: run %s\n", cell(args[0], 0), cell(res.RunID, 0))
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printSchedules(w io.Writer, now time.Time, all []scheduler.Info) error {
	if len(all) == 0 {
		fmt.Fprintln(w, "no schedules")
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tSPEC\tZONE\tPOLICY\tPAUSED\tLAST FIRE\tNEXT FIRES\tMISSED")
	for _, in := range all {
		name, spec, tz := cell(in.Name, identWidth), cell(in.Spec, identWidth), cell(orDash(in.TZ), identWidth)
		if in.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\trefused: %s\t-\n", name, spec, tz, cell(oneLine(in.Error), 60))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\t%s\t%d\n", name, spec, tz, cell(string(in.Policy), 0), in.Paused,
			whenPtr(now, in.LastFire), nextFires(in.Next), in.Missed)
	}
	return tw.Flush()
}

// nextFires renders the next fires in the schedule's zone, as the offset shows.
func nextFires(next []time.Time) string {
	s := make([]string, len(next))
	for i, t := range next {
		s[i] = t.Format(time.RFC3339)
	}
	return orDash(strings.Join(s, ", "))
}

func printSchedule(w io.Writer, now time.Time, in scheduler.Info) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("name", cell(in.Name, 0))
	if in.Error != "" {
		row("refused", errorCell(in.Error, true))
	}
	row("spec", cell(in.Spec, 0))
	row("zone", cell(orDash(in.TZ), 0))
	row("job", cell(in.Job, 0)+" (queue "+cell(orDash(in.Queue), 0)+")")
	row("policy", fmt.Sprintf("%s, maxCatchUp %d", cell(string(in.Policy), 0), in.MaxCatchUp))
	row("paused", fmt.Sprint(in.Paused))
	row("last fire", whenPtr(now, in.LastFire))
	row("last run", cell(orDash(in.LastRunID), 0))
	row("watermark", whenPtr(now, in.Watermark))
	row("missed", fmt.Sprint(in.Missed))
	row("checksum", cell(in.Checksum, 0))
	for i, t := range in.Next {
		k := ""
		if i == 0 {
			k = "next fires"
		}
		row(k, t.Format(time.RFC3339)+" ("+ago(now, t)+")")
	}
	return tw.Flush()
}
