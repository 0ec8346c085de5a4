package api

import (
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ultimat3/jobs/client"
	"github.com/ultimat3/jobs/mcp"
)

// MCPPath is where the server answers the Model Context Protocol (streamable HTTP).
const MCPPath = "/mcp"

// mcpHandler serves the operator's tools (package mcp) over streamable HTTP, behind the API's
// credentials: authenticate has checked the bearer token (a tenant-scoped one is refused, as
// on every route spanning tenants; a worker's may not read), and each request is served by the
// server its credential's role allows: the read tools for a viewer, every tool for an operator
// or admin.
//
// The handler is stateless (every POST is a whole exchange, no MCP session is kept): a
// session would be bound to the credential that opened it, and any later request presenting
// its id would be served with that credential's tools. Stateless, each request carries and is
// judged by its own token.
func (s *Server) mcpHandler() http.Handler {
	local := client.Local(s.eng, s.cfg.Scheduler)
	read := mcp.NewServer(local, mcp.Options{Access: mcp.ReadOnly, Logger: s.log})
	all := mcp.NewServer(local, mcp.Options{Access: mcp.ReadWrite, Logger: s.log})
	return sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		if credentialOf(r).Role.can(capAct) {
			return all
		}
		return read
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.log})
}
