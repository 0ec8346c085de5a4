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
		Args:  cobra.ExactArgs(1),
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
		Args:  cobra.ExactArgs(1),
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
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s is %s\n", in.Name, state)
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
		Args:  cobra.ExactArgs(1),
		RunE: co.withClient(func(cmd *cobra.Command, args []string, c *api.Client) error {
			res, err := c.TriggerSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "triggered %s: run %s\n", args[0], res.RunID)
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
		if in.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\trefused: %s\t-\n", in.Name, in.Spec, orDash(in.TZ), clip(in.Error, 60))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\t%s\t%d\n", in.Name, in.Spec, in.TZ, in.Policy, in.Paused,
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
	row("name", in.Name)
	if in.Error != "" {
		row("refused", in.Error)
	}
	row("spec", in.Spec)
	row("zone", orDash(in.TZ))
	row("job", in.Job+" (queue "+orDash(in.Queue)+")")
	row("policy", fmt.Sprintf("%s, maxCatchUp %d", in.Policy, in.MaxCatchUp))
	row("paused", fmt.Sprint(in.Paused))
	row("last fire", whenPtr(now, in.LastFire))
	row("last run", orDash(in.LastRunID))
	row("watermark", whenPtr(now, in.Watermark))
	row("missed", fmt.Sprint(in.Missed))
	row("checksum", in.Checksum)
	for i, t := range in.Next {
		k := ""
		if i == 0 {
			k = "next fires"
		}
		row(k, t.Format(time.RFC3339)+" ("+ago(now, t)+")")
	}
	return tw.Flush()
}
