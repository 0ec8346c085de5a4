package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesAnOpenBindWithoutTokens: serving beyond loopback needs a token or an explicit
// opt-out; a malformed credential is a usage error that does not echo the token.
func TestServeRefusesAnOpenBindWithoutTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := runCmd(ctx, "serve", "--addr", "0.0.0.0:0", "--data-dir", dir, "--database-url", "")
	expect(t, r, 2, "X_BAD_REQUEST: ")
	if !strings.Contains(r.stderr, "--allow-unauthenticated") {
		t.Fatalf("the refusal does not say how to proceed: %s", r.stderr)
	}
	r = runCmd(ctx, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--database-url", "", "--credential", "boss@acme=hunter2")
	expect(t, r, 2, "X_BAD_REQUEST: ")
	if strings.Contains(r.stderr, "hunter2") {
		t.Fatalf("the refusal shows the token: %s", r.stderr)
	}
}

// A token no request can carry (a secret file's trailing newline in $JOBS_TOKEN, a space) is a
// usage error naming the flag, not an engine that "did not answer"; the token is not shown.
func TestTokenThatCannotBeSentIsAUsageError(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	for _, tok := range []string{"hunter2\n", "hunt er2", "hunter2\x00"} {
		r := runCmd(context.Background(), "jobs", "ls", "--server", o.server[1], "--token", tok)
		expect(t, r, 2, "X_BAD_REQUEST: --token / $JOBS_TOKEN: the token holds ")
		if strings.Contains(r.stderr, "hunt") {
			t.Errorf("the refusal shows the token: %s", r.stderr)
		}
	}
}

// serve checks its credentials as the API server would (no token in two roles, none that cannot
// be sent) before it opens anything: a usage error, and no database created under --data-dir.
func TestServeChecksCredentialsBeforeCreatingAnything(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one token in two roles", []string{"--token", "same", "--viewer-token", "same"}, "one token is given two roles (admin and viewer)"},
		{"role token and credential", []string{"--operator-token", "same", "--credential", "viewer@acme=same"}, "one token is given two roles (operator and viewer)"},
		{"admin token with a newline", []string{"--token", "s3cr3t\n"}, "an admin credential has a token that holds a control character"},
		{"role token with a space", []string{"--worker-token", "s3c r3t"}, "a worker credential has a token that holds a space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// Bounded: an engine that started anyway would serve until its context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := runCmd(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--database-url", "", "--no-scheduler"}, tc.args...)...)
			expect(t, r, 2, "X_BAD_REQUEST: ")
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q, want it to say %q", r.stderr, tc.want)
			}
			if strings.Contains(r.stderr, "same") || strings.Contains(r.stderr, "s3c") {
				t.Errorf("the refusal shows the token: %s", r.stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "jobs.db")); !os.IsNotExist(err) {
				t.Errorf("a refused serve created the database: %v", err)
			}
		})
	}
}
