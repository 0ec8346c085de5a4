package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs/worker"
)

func TestLimitFlags(t *testing.T) {
	t.Parallel()
	got, err := limitFlags{perTenant: "2", perQueue: " 5", global: "12", rate: "100/1m"}.config()
	want := worker.LimitConfig{PerTenant: 2, PerQueue: 5, Global: 12, RatePerTenant: worker.Rate{N: 100, Per: time.Minute}}
	if err != nil || got != want {
		t.Fatalf("config = %+v, %v; want %+v", got, err, want)
	}
	if got, err := (limitFlags{perTenant: "0", perQueue: "0", global: "0"}).config(); err != nil || got != (worker.LimitConfig{}) {
		t.Fatalf("the defaults = %+v, %v; want no limits", got, err)
	}
}

func TestLimitFlagsUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--limit-per-tenant", "-1"},
		{"--limit-per-queue", "x"},
		{"--limit-global", "1.5"},
		{"--rate-per-tenant", "100"},
		{"--rate-per-tenant", "0/1m"},
		{"--rate-per-tenant", "5/0s"},
		{"--rate-per-tenant", "5/soon"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), "X_BAD_REQUEST: ") || !strings.Contains(errb.String(), args[0]) {
			t.Errorf("%v: exit %d, stderr %q; want 2, X_BAD_REQUEST naming %s", args, code, errb.String(), args[0])
		}
	}
}
