package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// tree is a command group with one command, and a command without subcommands, as the engine
// and the worker binaries are.
func tree() (group, single *cobra.Command) {
	group = &cobra.Command{Use: "tool", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil },
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true}}
	sub := &cobra.Command{Use: "sub", Short: "a subcommand", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	group.AddCommand(sub)
	single = &cobra.Command{Use: "single", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	return group, single
}

// `help` of a topic the tree does not have is a usage error, as an unknown command is; help of a
// known one, and --help, exit 0 with the help. A tree without subcommands has no help command:
// `help` is an unknown command there.
func TestHelpOfAnUnknownTopicIsAUsageError(t *testing.T) {
	for _, tc := range []struct {
		single bool
		args   []string
		code   int
		stderr string
	}{
		{false, []string{"help", "bogus"}, ExitUsage, `X_BAD_REQUEST: unknown help topic "bogus"; "tool" has: sub`},
		{false, []string{"help", "sub", "bogus"}, ExitUsage, `X_BAD_REQUEST: unknown help topic "sub bogus"; "tool sub" has no subcommands`},
		{false, []string{"help"}, ExitOK, ""},
		{false, []string{"help", "sub"}, ExitOK, ""},
		{false, []string{"--help"}, ExitOK, ""},
		{true, []string{"help", "bogus"}, ExitUsage, `X_BAD_REQUEST: unknown command "help" for "single"`},
		{true, []string{"--help"}, ExitOK, ""},
	} {
		group, single := tree()
		root := group
		if tc.single {
			root = single
		}
		var out, errb bytes.Buffer
		code := Execute(root, tc.args, &out, &errb)
		if code != tc.code || !strings.HasPrefix(errb.String(), tc.stderr) {
			t.Errorf("%s %q: exit %d, stderr %q; want %d and %q", root.Name(), tc.args, code, errb.String(), tc.code, tc.stderr)
		}
		if code == ExitOK && !strings.Contains(out.String(), "Usage:") {
			t.Errorf("%s %q printed no help: %q", root.Name(), tc.args, out.String())
		}
	}
}

// NewClient refuses what the API client refuses as a usage error naming the flag at fault: a
// token that cannot be sent names --token and $JOBS_TOKEN (and does not show the token), an
// address that is not one names --server.
func TestNewClientNamesTheFlagAtFault(t *testing.T) {
	for _, tc := range []struct {
		server, token, want string
	}{
		{"127.0.0.1:1", "hunter2\n", "X_BAD_REQUEST: --token / $JOBS_TOKEN: the token holds a control character (0x0a, byte 8 of 8)"},
		{"127.0.0.1:1", "hunter 2", "X_BAD_REQUEST: --token / $JOBS_TOKEN: the token holds a space"},
		{"ftp://x", "hunter2", `X_BAD_REQUEST: --server "ftp://x": want http://host:port`},
	} {
		c, err := NewClient(tc.server, tc.token)
		if err == nil {
			c.Close()
			t.Errorf("%q with token %q: accepted", tc.server, tc.token)
			continue
		}
		var u usageError
		if got := describe(err, "X_INTERNAL"); !errors.As(err, &u) || !strings.HasPrefix(got, tc.want) || strings.Contains(got, "hunter") {
			t.Errorf("%q with token %q: %q (usage error: %v), want a usage error starting %q", tc.server, tc.token, got, errors.As(err, &u), tc.want)
		}
	}
	for _, server := range []string{"127.0.0.1:1", "http://127.0.0.1:1", "https://engine.example:443"} {
		c, err := NewClient(server, "hunter2")
		if err != nil {
			t.Errorf("%q: %v", server, err)
			continue
		}
		c.Close()
	}
}

// CheckEnvBools refuses a set variable that is not a boolean, naming it; unset, empty and the
// forms strconv.ParseBool reads pass.
func TestCheckEnvBools(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "true": true, "0": true, "F": true, "yes": false, "off": false} {
		t.Setenv("JOBS_TEST_BOOL", v)
		err := CheckEnvBools("JOBS_TEST_BOOL")
		if (err == nil) != ok {
			t.Errorf("JOBS_TEST_BOOL=%q: %v", v, err)
		}
		if err != nil && !strings.HasPrefix(describe(err, "X_INTERNAL"), `X_BAD_REQUEST: $JOBS_TEST_BOOL "`+v+`"`) {
			t.Errorf("JOBS_TEST_BOOL=%q: %v does not name it", v, err)
		}
	}
}
