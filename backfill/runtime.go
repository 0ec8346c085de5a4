package backfill

import (
	"context"
	"os"
	"runtime/debug"
)

// EnvVar names the environment variable that says which environment a process runs in, when its
// context does not (WithRuntime).
const EnvVar = "JOBS_ENV"

// Runtime is what a pass knows of where it runs.
type Runtime struct {
	// Environment is matched against a backfill's Environments.
	Environment string
	// AppVersion is recorded on the ledger row.
	AppVersion string
}

type runtimeKey struct{}

// WithRuntime returns ctx carrying rt. Give it to the worker as its BaseContext so every pass
// knows its environment:
//
//	worker.Config{BaseContext: func() context.Context {
//		return backfill.WithRuntime(context.Background(), backfill.Runtime{Environment: "staging"})
//	}}
func WithRuntime(ctx context.Context, rt Runtime) context.Context {
	return context.WithValue(ctx, runtimeKey{}, rt)
}

// RuntimeFrom returns the runtime ctx carries; missing fields come from $JOBS_ENV and the
// binary's build information.
func RuntimeFrom(ctx context.Context) Runtime {
	rt, _ := ctx.Value(runtimeKey{}).(Runtime)
	if rt.Environment == "" {
		rt.Environment = os.Getenv(EnvVar)
	}
	if rt.AppVersion == "" {
		rt.AppVersion = buildVersion()
	}
	return rt
}

func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return s.Value[:12]
		}
	}
	if v := bi.Main.Version; v != "(devel)" {
		return v
	}
	return ""
}
