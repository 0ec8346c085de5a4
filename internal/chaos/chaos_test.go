package chaos

import (
	"os"
	"testing"
	"time"
)

// TestChaosShort is the short chaos run `make test` includes: SQLite, a few hundred runs, about
// 20 seconds of kills. The Postgres run (with its store crash) and the long runs are `make chaos`.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and kills processes")
	}
	cfg := Config{Store: "sqlite", Runs: 150, Steps: 4, Linger: 100 * time.Millisecond, Workers: 3, Concurrency: 6,
		Chaos: 20 * time.Second, KillEvery: 2 * time.Second, Settle: 90 * time.Second, Seed: time.Now().UnixNano()}
	if os.Getenv("JOBS_CHAOS_LOG") != "" {
		cfg.Log = os.Stderr
	}
	rep, err := Run(t.Context(), t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d\n%s", cfg.Seed, rep.Table())
	if err := rep.Check(); err != nil {
		t.Fatal(err)
	}
}
