package main

import (
	"errors"
	"io"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/mcp"
)

// newMCPCmd serves the operator's MCP tools over stdio, proxying to a remote engine.
func newMCPCmd() *cobra.Command {
	var co clientOptions
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the engine's MCP tools over stdio, for an assistant (proxied to --server)",
		Long: "Speaks the Model Context Protocol on stdin/stdout: list and inspect runs, queues, dead\n" +
			"letters, the manifest, backfills, schedules and a run's history; cancel and retry runs.\n" +
			"Every call goes to the engine at --server with --token, so the token's role is the\n" +
			"caller's: a viewer's token is served the read tools only, an operator's or admin's every\n" +
			"tool. A worker's token and a tenant-scoped one are refused. Logs go to stderr.\n\n" +
			"An engine also serves the same tools at /mcp (streamable HTTP).",
		Args: cobra.NoArgs,
		RunE: co.withClient(func(cmd *cobra.Command, _ []string, c *api.Client) error {
			ctx := cmd.Context()
			// Who the token is decides the tools: asked once, before the handshake.
			id, err := c.WhoAmI(ctx)
			if err != nil {
				return err
			}
			if id.Tenant != "" {
				return jobs.Errorf(jobs.CodeForbidden, "a credential scoped to tenant %q cannot serve the MCP tools, which span every tenant", id.Tenant)
			}
			access := mcp.ReadOnly
			switch id.Role {
			case api.RoleOperator, api.RoleAdmin:
				access = mcp.ReadWrite
			case api.RoleViewer:
			default:
				return jobs.Errorf(jobs.CodeForbidden, "a %s credential may not read runs", id.Role)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			srv := mcp.NewServer(c, mcp.Options{Access: access, Actor: "mcp:" + string(id.Role), Logger: log})
			t := &sdk.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}}
			err = srv.Run(ctx, t)
			if err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil // the client closed stdin, or the process was told to stop
			}
			return err
		}),
	}
	co.flags(cmd)
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
