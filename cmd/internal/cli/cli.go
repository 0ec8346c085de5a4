// Package cli holds what the engine and worker binaries share: exit codes and how errors are
// printed, flags that default from the environment, the logger, and running an fx app until
// SIGTERM with an ordered drain.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the command ran and failed: the engine refused, or could not be reached
	ExitUsage = 2 // the command line is wrong
)

// usageError is a mistake in the command line.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// Usage returns a usage error: printed with X_BAD_REQUEST and a pointer to --help, exit 2.
func Usage(format string, args ...any) error {
	return usageError{jobs.Errorf(jobs.CodeBadRequest, format, args...)}
}

// UsageCode is Usage with a more precise code than X_BAD_REQUEST (a missing tenant is
// X_JOB_TENANT_REQUIRED whether the engine or the command line notices).
func UsageCode(c jobs.Code, format string, args ...any) error {
	return usageError{jobs.Errorf(c, format, args...)}
}

// Execute runs a cobra command tree with args and returns the process's exit code. Errors are
// printed on stderr as "X_CODE: message", whatever produced them.
func Execute(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SilenceErrors = true
	root.SilenceUsage = true
	// Cobra reports bad flags, bad argument counts, missing required flags and unknown commands
	// before a command's RunE: everything it returns before one starts is a usage error.
	started := false
	setHelpCommand(root)
	requireSubcommand(root)
	markStart(root, &started)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	var u usageError
	if !started || errors.As(err, &u) {
		fmt.Fprintf(stderr, "%s\nRun '%s --help' for usage.\n", describe(err, jobs.CodeBadRequest), cmd.CommandPath())
		return ExitUsage
	}
	fmt.Fprintln(stderr, describe(err, jobs.CodeInternal))
	return ExitError
}

// requireSubcommand makes a command group that does nothing itself ("engine jobs") refuse to run
// without one of its subcommands, or with an unknown one, as a usage error (exit 2). Cobra would
// print the group's help and exit 0, which a script reads as success.
func requireSubcommand(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			names := subcommands(cmd)
			if len(args) > 0 {
				return Usage("unknown command %q for %q; want one of: %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
			}
			return Usage("%q needs a subcommand: %s", cmd.CommandPath(), strings.Join(names, ", "))
		}
	}
	for _, sub := range c.Commands() {
		requireSubcommand(sub)
	}
}

// subcommands names the commands of c a user may run.
func subcommands(c *cobra.Command) []string {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return names
}

// setHelpCommand replaces cobra's help command, which prints the root's help and exits 0 for a
// topic it does not know ("engine help bogus"): a script reads that as success, where the same
// unknown name as a command is a usage error. Only a command tree with subcommands has one.
func setHelpCommand(root *cobra.Command) {
	if !root.HasSubCommands() {
		return
	}
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Prints the help of the command named, or of " + root.Name() + " without one.",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err == nil && cmd != nil && len(rest) == 0 {
				return cmd.Help()
			}
			if cmd == nil {
				cmd = c.Root()
			}
			topic := strings.Join(args, " ")
			if names := subcommands(cmd); len(names) > 0 {
				return Usage("unknown help topic %q; %q has: %s", topic, cmd.CommandPath(), strings.Join(names, ", "))
			}
			return Usage("unknown help topic %q; %q has no subcommands", topic, cmd.CommandPath())
		},
	})
}

func markStart(c *cobra.Command, started *bool) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*started = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markStart(sub, started)
	}
}

// describe renders err as "X_CODE: message": the *jobs.Error it wraps, if any (fx and cobra
// wrap errors in their own words, which say less than the code), else fallback and the text.
func describe(err error, fallback jobs.Code) string {
	var e *jobs.Error
	msg := string(fallback) + ": " + err.Error()
	if errors.As(err, &e) {
		msg = e.Error()
	}
	return oneLine(msg)
}

// oneLine puts an error on one line, its lines joined by "; ": a driver's error may hold one
// line per address it tried (pgx's dial errors do), and an error is one line on the terminal and
// in a script's log.
func oneLine(msg string) string {
	var b strings.Builder
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ") // a heading and its first item
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// Env returns the environment variable name, or def when it is unset or empty.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// EnvBool is Env for a boolean (strconv.ParseBool: 1, t, true, 0, f, false, …); an unparsable
// value leaves def, and the command that reads it refuses it when its flags are checked.
func EnvBool(name string, def bool) bool {
	if v := os.Getenv(name); v != "" {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return def
}

// EnvDuration is Env for a duration; an unparsable value is reported when flags are checked.
func EnvDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// CheckEnvDurations refuses, as a usage error, a variable EnvDuration read that is set but is not
// a duration: EnvDuration left the flag at its default, which the user did not ask for.
func CheckEnvDurations(names ...string) error {
	for _, name := range names {
		if v := os.Getenv(name); v != "" {
			if _, err := time.ParseDuration(v); err != nil {
				return Usage("$%s %q: want a duration such as 30s", name, v)
			}
		}
	}
	return nil
}

// EngineURL is the engine's address as --server gives it, a bare host:port meaning http.
func EngineURL(server string) string {
	if !strings.Contains(server, "://") {
		return "http://" + server
	}
	return server
}

// NewClient opens a client of the engine at --server with --token. What api.NewClient refuses is
// a usage error naming the flag at fault: a token it cannot send (a secret file's trailing
// newline in $JOBS_TOKEN) would otherwise fail every call as an engine that did not answer.
func NewClient(server, token string, opts ...api.ClientOption) (*api.Client, error) {
	c, err := api.NewClient(EngineURL(server), token, opts...)
	if err == nil {
		return c, nil
	}
	if err := api.CheckToken(token); err != nil {
		return nil, Usage("--token / $JOBS_TOKEN: %s", message(err))
	}
	return nil, Usage("--server %q: want http://host:port", server)
}

// message is an error's text without its code, for a usage error that says it in its own words.
func message(err error) string {
	var e *jobs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// CheckEnvBools refuses, as a usage error, a variable EnvBool read that is set but is not a
// boolean: EnvBool left the flag at its default, which the user did not ask for.
func CheckEnvBools(names ...string) error {
	for _, name := range names {
		if v := os.Getenv(name); v != "" {
			if _, err := strconv.ParseBool(v); err != nil {
				return Usage("$%s %q: want true or false", name, v)
			}
		}
	}
	return nil
}

// Logger returns the process's logger: text or JSON on w, at level.
func Logger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, Usage("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, Usage("--log-format %q: want text or json", format)
}

// FxLogger routes fx's own events to log, quietly: its step-by-step wiring and its errors at
// debug. A failed start's error reaches the user once, cleanly, as "X_CODE: message" from
// Execute; fx's own account of it (the constructor chain, a stack trace) is for --log-level debug.
func FxLogger(log *slog.Logger) fx.Option {
	return fx.WithLogger(func() fxevent.Logger {
		l := &fxevent.SlogLogger{Logger: log}
		l.UseLogLevel(slog.LevelDebug)
		l.UseErrorLevel(slog.LevelDebug)
		return l
	})
}

// Serve starts app, waits for SIGINT or SIGTERM (or ctx to end), then stops it within
// stopTimeout. fx runs the stop hooks in the reverse order of the start hooks, which is the
// drain order the services are wired for: stop accepting, finish what is in flight, close the
// store.
func Serve(ctx context.Context, app *fx.App, log *slog.Logger, startTimeout, stopTimeout time.Duration) error {
	if err := app.Err(); err != nil {
		return err
	}
	// A shutdown asked for while the app is starting waits for the start to finish (bounded by
	// startTimeout) and then drains like any other: cancelling the start half-way would unwind
	// the started hooks with a dead context and report a failure nobody caused.
	startCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	err := app.Start(startCtx)
	cancel()
	if err != nil {
		return err
	}
	select {
	case sig := <-app.Wait():
		log.Info("jobs.shutdown", "signal", sig.Signal.String(), "drain_timeout", stopTimeout)
	case <-ctx.Done():
		log.Info("jobs.shutdown", "reason", context.Cause(ctx).Error(), "drain_timeout", stopTimeout)
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if err := app.Stop(stopCtx); err != nil {
		return jobs.Wrap(jobs.CodeDraining, err, "the drain did not finish cleanly within %s", stopTimeout)
	}
	log.Info("jobs.stopped")
	return nil
}
