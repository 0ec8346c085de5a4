// Command engine runs the jobs engine and talks to it.
//
// With no subcommand (or "serve") it serves the API (worker protocol, admin API, /metrics,
// /healthz, /readyz) on 127.0.0.1:7233, over the embedded SQLite store at ./data/jobs.db, or over
// Postgres when --database-url / DATABASE_URL names one. "engine migrate" applies the schema and
// exits. The operator subcommands (jobs, events, history, dead-letters, codes, manifest, overview,
// schedules, backfill, retention, mcp) talk to a running engine's API at --server / JOBS_SERVER;
// every listing has --json.
//
// Errors print as "X_CODE: message" on stderr. Exit codes: 0 ok, 1 the command failed, 2 the
// command line is wrong.
package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs/cmd/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit code; tests call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetContext(ctx)
	return cli.Execute(root, args, stdout, stderr)
}

func newRootCmd() *cobra.Command {
	var o serveOptions
	root := &cobra.Command{
		Use:   "engine",
		Short: "The jobs engine: serve it, migrate its database, and operate it",
		Long: "Without a subcommand, engine serves the API (as \"engine serve\").\n\n" +
			"Errors print as \"X_CODE: message\" on stderr; exit 1 when a command fails, 2 for usage.",
		Args:              cobra.NoArgs,
		RunE:              func(cmd *cobra.Command, _ []string) error { return serve(cmd, &o) },
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	o.flags(root)

	var so serveOptions
	serveCmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API until SIGTERM (the default)",
		Long: "Serves the worker protocol, the admin API, /metrics, /healthz and /readyz. SIGTERM or\n" +
			"SIGINT drains in order: stop accepting requests, finish those in flight and the queued\n" +
			"commits, close the store; then exit 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd, &so) },
	}
	so.flags(serveCmd)

	root.AddCommand(serveCmd, newMigrateCmd(), newJobsCmd(), newEventsCmd(), newHistoryCmd(),
		newDeadLettersCmd(), newCodesCmd(), newManifestCmd(), newOverviewCmd())
	root.AddCommand(newSchedulesCmd(), newBackfillCmd())
	root.AddCommand(newMCPCmd())
	root.AddCommand(newRetentionCmd())
	return root
}
