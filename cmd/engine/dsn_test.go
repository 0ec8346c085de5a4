package main

import (
	"context"
	"strings"
	"testing"
)

// A database address that is not a postgres:// URL is refused without being echoed: it may be
// a key=value connection string with a password. A URL of another database is named by its
// scheme alone; --migrations of `engine backfill` likewise.
func TestDatabaseURLIsNeverEchoed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct{ url, want string }{
		{"host=127.0.0.1 password=SECRETPW", "is not a URL"},
		{"host=db user=app password='SECRETPW with: colon'", "is not a URL"},
		{"SECRETPW", "is not a URL"},
		{"SECRETPW:also", "is not a URL"},
		{"mysql://app:SECRETPW@db/app", `names a "mysql" database`},
		{"mysql://app:SECRETPW%zz@db/app", `names a "mysql" database`},
	} {
		for _, cmd := range []string{"serve", "migrate"} {
			r := runCmd(ctx, cmd, "--database-url", tc.url, "--data-dir", dir, "--addr", "127.0.0.1:0")
			if cmd == "migrate" {
				r = runCmd(ctx, cmd, "--database-url", tc.url, "--data-dir", dir)
			}
			expect(t, r, 1, "X_DRIVER_UNAVAILABLE: ")
			if strings.Contains(r.stderr, "SECRETPW") || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%s --database-url %q: stderr %q, want %q and no password", cmd, tc.url, r.stderr, tc.want)
			}
		}
	}

	o := setupOps(t)
	for _, m := range []string{"host=db password=SECRETPW", "mysql://u:SECRETPW@db/app"} {
		r := o.run(t, "backfill", "some-backfill", "--migrations", m)
		expect(t, r, 2, "X_BAD_REQUEST: --migrations")
		if strings.Contains(r.stderr, "SECRETPW") {
			t.Errorf("--migrations %q: stderr %q shows the password", m, r.stderr)
		}
	}
}

func TestURLScheme(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"mysql://x": "mysql", "sqlserver+tls://x": "sqlserver+tls", "postgres://": "", "host=a password=b": "",
		"a b://x": "", "1db://x": "", "://x": "", "sqlite:jobs.db": "", "host=x password=a://b": "",
	} {
		if got, _ := urlScheme(in); got != want {
			t.Errorf("urlScheme(%q) = %q, want %q", in, got, want)
		}
	}
}
