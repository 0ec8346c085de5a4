package main

import (
	"context"
	"strings"
	"testing"
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
