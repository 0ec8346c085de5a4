// Package mcp serves the operator's API (package client) as Model Context Protocol tools, so an
// assistant can look at runs, queues, dead letters, the manifest, backfills, schedules and
// histories, and, with an operator's credential, cancel and retry runs.
//
// Every tool is one call of client.Client: the numbers are the engine's projections, the same
// the CLI, the JSON API and the /_x console show. A tool's result is its answer as JSON text
// and as structured content; a refusal is a tool error whose text and structured content are
// {"error":{"code":"X_…","message":"…"}}, so the caller can read the code as it would from the
// HTTP API.
//
// The same tools are served two ways: by the engine at /mcp (streamable HTTP, behind the API's
// credentials; package api mounts Handler) and by `engine mcp` over stdio, proxying to a
// remote engine through *api.Client.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/internal/refuse"
)

// Access is what a server's caller may do.
type Access int

const (
	// ReadOnly lists and serves the read tools only; a call of an action tool is refused with
	// X_FORBIDDEN before anything is asked of the engine.
	ReadOnly Access = iota
	// ReadWrite serves every tool.
	ReadWrite
)

// Version is the server's version in the MCP handshake.
const Version = "1"

// Options configures a server.
type Options struct {
	// Access defaults to ReadOnly.
	Access Access
	// Actor is recorded as who retried a run when the call names nobody (RunRetried.By).
	// Defaults to "mcp".
	Actor string
	// Logger receives the panics a tool recovered from and the errors refused without their
	// text (those carrying no X_ code). Defaults to slog.Default().
	Logger *slog.Logger
}

// NewServer returns an MCP server whose tools ask c.
func NewServer(c client.Client, o Options) *sdk.Server {
	if o.Actor == "" {
		o.Actor = "mcp"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "jobs", Title: "jobs engine", Version: Version}, &sdk.ServerOptions{
		Instructions: "Tools of a durable workflow engine: list and inspect runs, queues, dead letters, the workers' " +
			"manifest, backfills, schedules and a run's history; cancel and retry runs (operators only). " +
			"Refusals carry an X_ code.",
	})
	t := &tools{c: c, o: o}
	t.register(s)
	s.AddReceivingMiddleware(t.guard)
	return s
}

// ErrorBody is a refused tool call's structured content (and text).
type ErrorBody struct {
	Error *jobs.Error `json:"error"`
}

// refusal is a tool error carrying e's X_ code and message. It takes a coded error only: an
// error a tool's body returned goes through refuse first (tools.refuse).
func refusal(e *jobs.Error) *sdk.CallToolResult {
	body := ErrorBody{Error: &jobs.Error{Code: e.Code, Message: e.Message}}
	b, _ := json.Marshal(body)
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}, StructuredContent: body}
}

// guard is the server's receiving middleware: it refuses the action tools on a read-only
// server with X_FORBIDDEN (so a viewer learns why, rather than "unknown tool"), and gives a
// call the SDK refused before any tool ran (its arguments do not match the tool's schema) the
// code X_BAD_REQUEST.
func (t *tools) guard(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		name := ""
		if p, ok := req.GetParams().(*sdk.CallToolParamsRaw); ok {
			name = p.Name
		}
		if t.o.Access != ReadWrite && actionTools[name] {
			return refusal(jobs.Errorf(jobs.CodeForbidden, "tool %s acts on runs: this credential may only look", name)), nil
		}
		res, err := next(ctx, method, req)
		if r, ok := res.(*sdk.CallToolResult); ok && err == nil && r.IsError && r.StructuredContent == nil {
			msg := ""
			for _, c := range r.Content {
				if tc, ok := c.(*sdk.TextContent); ok {
					msg += tc.Text
				}
			}
			return refusal(jobs.Errorf(jobs.CodeBadRequest, "%s: %s", name, strings.TrimSpace(msg))), nil
		}
		return res, err
	}
}

// refuse is tool name's refusal of err, answered within ctx (the call's). An error without an X_
// code (a store's or driver's own, which may name hosts, users or credentials) is refused and
// logged by the rule the HTTP API follows (internal/refuse): the tools are served at /mcp to
// the same credentials, and a viewer may not read there what GET /v1/… does not show it.
func (t *tools) refuse(ctx context.Context, name string, err error) *sdk.CallToolResult {
	return refusal(refuse.Of(ctx, t.o.Logger, "jobs.mcp", err, "tool", name))
}

// safely runs a tool's body within ctx, turning a panic into X_INTERNAL (logged) rather than a
// dead connection: bad input is refused before it could panic, so only a bug gets here.
func (t *tools) safely(ctx context.Context, name string, body func() (any, error)) (res *sdk.CallToolResult, out any, err error) {
	defer func() {
		if v := recover(); v != nil {
			t.o.Logger.Error("jobs.mcp.panic", "tool", name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res, out, err = refusal(jobs.Errorf(jobs.CodeInternal, "internal error in tool %s; the engine logged it", name)), nil, nil
		}
	}()
	v, e := body()
	if e != nil {
		return t.refuse(ctx, name, e), nil, nil
	}
	return nil, v, nil
}
