package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
			"One JSON-RPC message per line. A line that is not one is answered with a JSON-RPC error\n" +
			"(-32700, or -32600 for JSON that is no message) and skipped. At the end of stdin the\n" +
			"requests still in flight are answered before the command exits.\n\n" +
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
				return jobs.Errorf(jobs.CodeForbidden, "%s may not read runs", id.Role.Credential())
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			srv := mcp.NewServer(c, mcp.Options{Access: access, Actor: "mcp:" + string(id.Role), Logger: log})
			// Each tool makes one call to the engine, bounded by --timeout: the drain at the end
			// of stdin waits that long, and a second to write the answer.
			err = srv.Run(ctx, newStdioTransport(cmd.InOrStdin(), cmd.OutOrStdout(), co.timeout+time.Second))
			if err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil // the client closed stdin, or the process was told to stop
			}
			return err
		}),
	}
	co.flags(cmd)
	return cmd
}

// stdioTransport is the SDK's newline-delimited JSON-RPC over stdin and stdout (sdk.IOTransport),
// made to keep serving through a bad line and to answer what is in flight at the end of stdin.
//
// The SDK's transport decodes stdin as one stream of JSON: the first line that is not JSON ends
// its reading for good, and the session with it, and the replies to requests still in flight are
// dropped, as they are at the end of stdin (the session ends when reading does). So stdin reaches
// it through lineFilter, which hands on only the lines that are JSON-RPC messages and answers
// each other line with a JSON-RPC error, and the connection (drainingConn) holds back the end of
// stdin until every request read has been answered.
type stdioTransport struct {
	in    io.Reader
	out   io.Writer
	drain time.Duration // how long the end of stdin waits for the answers in flight
}

func newStdioTransport(in io.Reader, out io.Writer, drain time.Duration) *stdioTransport {
	return &stdioTransport{in: in, out: out, drain: drain}
}

// Connect implements sdk.Transport.
func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	out := &lockedWriter{w: t.out}
	filter := &lineFilter{in: bufio.NewReader(t.in), out: out, max: sdk.DefaultMaxLineLength}
	// Lines are bounded by lineFilter, which answers an over-long one instead of ending the
	// session: the SDK's own bound is left off.
	inner, err := (&sdk.IOTransport{Reader: io.NopCloser(filter), Writer: out, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainingConn{Connection: inner, drain: t.drain, open: map[jsonrpc.ID]int{}, closed: make(chan struct{})}, nil
}

// lockedWriter is stdout, shared by the SDK's answers and lineFilter's: each writes a whole line
// in one Write, and the lock keeps two lines from interleaving.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lockedWriter) Close() error { return nil }

// lineFilter reads stdin a line at a time and passes on each line that holds one JSON-RPC
// message, trimmed. Any other line is answered on stdout with a JSON-RPC error, id null as the
// protocol has it when the id cannot be read, and skipped: -32700 for a line that is not JSON (or
// longer than max bytes), -32600 for JSON that is not a message, and for a batch (refuseBatch).
// A blank line is skipped.
type lineFilter struct {
	in   *bufio.Reader
	out  io.Writer
	max  int
	next []byte // the rest of the line being handed on
	err  error  // stdin's error, returned once the lines before it are handed on
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.next) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, tooLong, err := f.line()
		f.err = err
		line = bytes.TrimSpace(line)
		switch {
		case tooLong:
			f.refuse(jsonrpc.CodeParseError, fmt.Sprintf("parse error: the line is longer than %d bytes", f.max))
		case len(line) == 0:
		case !json.Valid(line):
			f.refuse(jsonrpc.CodeParseError, "parse error: the line is not JSON")
		case line[0] == '[':
			f.refuseBatch(line)
		case !isMessage(line):
			f.refuse(jsonrpc.CodeInvalidRequest, "invalid request: the line is JSON but not a JSON-RPC 2.0 message")
		default:
			f.next = append(line, '\n')
		}
	}
	n := copy(p, f.next)
	f.next = f.next[n:]
	return n, nil
}

// line reads the next line, without its newline. A line longer than max is read to its end and
// dropped (tooLong), so that what follows it is still served.
func (f *lineFilter) line() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := f.in.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > f.max+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte{'\n'}), tooLong, err
	}
}

// isMessage reports whether a line of JSON is one JSON-RPC message, as the SDK's transport reads
// it.
func isMessage(line []byte) bool {
	_, err := jsonrpc.DecodeMessage(line)
	return err == nil
}

// batchRefusal is the answer to each call of a batch line.
const batchRefusal = "invalid request: a JSON-RPC batch is not served: send one message a line"

// refuseBatch answers a line that is a JSON array (a JSON-RPC batch) without handing it on: each
// call in it gets -32600 by its id, in one array as a batch is answered, and a line with no
// call one -32600 with id null.
//
// The SDK's transport ended the session on a batch whose messages each passed isMessage: one
// repeating an id ("duplicate message ID"), one reusing the id of a batch still in flight, one
// nested deeper than its limit only as a whole (engine mcp exited 1, X_INTERNAL, the calls in
// flight unanswered). Checking those would copy the transport's bookkeeping; batches are gone
// from the protocol since 2025-06-18, and /mcp serves one message a request too.
func (f *lineFilter) refuseBatch(line []byte) {
	var batch []json.RawMessage
	_ = json.Unmarshal(line, &batch)
	var answers []json.RawMessage
	for _, m := range batch {
		msg, err := jsonrpc.DecodeMessage(m)
		if req, ok := msg.(*jsonrpc.Request); err == nil && ok && req.IsCall() {
			b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: batchRefusal}})
			if err == nil {
				answers = append(answers, b)
			}
		}
	}
	if len(answers) == 0 {
		f.refuse(jsonrpc.CodeInvalidRequest, batchRefusal)
		return
	}
	b, _ := json.Marshal(answers)
	_, _ = f.out.Write(append(b, '\n'))
}

// refuse answers a line that is no message.
func (f *lineFilter) refuse(code int64, msg string) {
	b, _ := json.Marshal(struct {
		Version string        `json:"jsonrpc"`
		ID      any           `json:"id"`
		Error   jsonrpc.Error `json:"error"`
	}{"2.0", nil, jsonrpc.Error{Code: code, Message: msg}})
	_, _ = f.out.Write(append(b, '\n'))
}

// drainingConn is the SDK's connection over stdin and stdout, counting the requests read and
// their answers written. At the end of stdin, Read waits (at most drain) until every request
// read has its answer before it reports the end, which ends the session: the SDK drops the
// answers still in flight when reading ends. (Wrapped, the SDK's connection no longer hears the
// protocol version the session settled on, whose one use there is to refuse JSON-RPC batches
// from 2025-06-18 on: lineFilter refuses every batch before it.)
type drainingConn struct {
	sdk.Connection
	drain time.Duration

	mu     sync.Mutex
	open   map[jsonrpc.ID]int // requests read and not yet answered, by id
	idle   chan struct{}      // closed when open empties; nil while nothing waits
	closed chan struct{}
	once   sync.Once
}

func (c *drainingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if errors.Is(err, io.EOF) {
		c.wait(ctx)
		return nil, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.mu.Lock()
		c.open[req.ID]++
		c.mu.Unlock()
	}
	return msg, err
}

func (c *drainingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		if c.open[resp.ID]--; c.open[resp.ID] <= 0 {
			delete(c.open, resp.ID)
		}
		if len(c.open) == 0 && c.idle != nil {
			close(c.idle)
			c.idle = nil
		}
		c.mu.Unlock()
	}
	return err
}

func (c *drainingConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

// wait returns once every request read has been answered, the connection is closed, ctx ends,
// or drain has passed.
func (c *drainingConn) wait(ctx context.Context) {
	c.mu.Lock()
	if len(c.open) == 0 {
		c.mu.Unlock()
		return
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	timer := time.NewTimer(c.drain)
	defer timer.Stop()
	select {
	case <-idle:
	case <-c.closed:
	case <-ctx.Done():
	case <-timer.C:
	}
}
