package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs/bench/internal/report"
	"github.com/ultimat3/jobs/bench/systems"
)

// collectInfo gathers what the report says about the machine and the software measured, so a
// reader can tell whether a later figure is comparable.
func collectInfo(ctx context.Context, admin *pgx.Conn, cfg config, scratch string) (report.Info, error) {
	in := report.Info{
		Date:           time.Now().UTC(),
		Quick:          cfg.Quick,
		Runs:           cfg.Runs,
		NoopJobs:       cfg.NoopJobs,
		TenStepRuns:    cfg.TenStepRuns,
		Concurrency:    cfg.Concurrency,
		PoolSize:       cfg.PoolSize,
		PgbenchSeconds: cfg.PgbenchSeconds,
		SQLiteSeconds:  cfg.SQLiteSeconds,
		ReplayEvents:   cfg.ReplayEvents,
		ResumeEvents:   cfg.ResumeEvents,
		Timers:         cfg.Timers,
		FairBacklog:    cfg.FairBacklog,
		TimerWindow:    cfg.TimerWindow,
		TimerLead:      cfg.timerLead(),
		BackfillRows:   cfg.BackfillRows,
		BackfillPages:  cfg.BackfillPages,
		BulkJobs:       cfg.BulkJobs,
		TxCount:        cfg.TxCount,
		RelayRows:      cfg.RelayRows,
		DrainJobs:      cfg.DrainJobs,
		NProc:          runtime.NumCPU(),
		GoVersion:      runtime.Version(),
		CPUModel:       procField("/proc/cpuinfo", "model name"),
		MemTotal:       procField("/proc/meminfo", "MemTotal"),
		Kernel:         strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		ScratchFS:      fsType(scratch),
		JobsRev:        cfg.JobsRev,
	}

	if err := admin.QueryRow(ctx, `SHOW server_version`).Scan(&in.PostgresVersion); err != nil {
		return in, fmt.Errorf("postgres version: %w", err)
	}
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes", "wal_level",
		"wal_sync_method", "shared_buffers", "max_connections", "max_wal_size", "checkpoint_timeout"} {
		var v string
		if err := admin.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err == nil {
			in.PostgresSettings = append(in.PostgresSettings, [2]string{name, v})
		}
	}
	var dataDir string
	if err := admin.QueryRow(ctx, `SHOW data_directory`).Scan(&dataDir); err == nil {
		in.PGDataFS = fsType(dataDir)
	}
	if out, err := exec.Command(cfg.Pgbench, "--version").Output(); err == nil {
		in.PgbenchVersion = strings.TrimSpace(string(out))
	} else {
		in.PgbenchVersion = "unavailable: " + err.Error()
	}
	in.SQLiteVersion = sqliteVersion()

	// Versions come from this binary's own build information, so they are the ones measured.
	deps := map[string]*debug.Module{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			deps[m.Path] = m
		}
	}
	version := func(path string) string {
		m, ok := deps[path]
		if !ok {
			return "not linked"
		}
		if m.Replace != nil {
			if m.Replace.Version == "" {
				return "local checkout (" + m.Replace.Path + ")"
			}
			return m.Replace.Version
		}
		return m.Version
	}
	seen := map[string]bool{}
	for _, key := range systems.Keys() {
		f, _ := systems.Lookup(key)
		sys := f()
		in.Systems = append(in.Systems, report.SystemInfo{Key: key, Name: sys.Name(), Module: sys.Module(), Version: version(sys.Module())})
		if mod := sys.Module(); mod != "" && !seen[mod] {
			seen[mod] = true
			in.Modules = append(in.Modules, [2]string{mod, version(mod)})
		}
	}
	for _, mod := range []string{"github.com/riverqueue/river/riverdriver/riverpgxv5", "github.com/jackc/pgx/v5", "modernc.org/sqlite"} {
		if !seen[mod] {
			seen[mod] = true
			in.Modules = append(in.Modules, [2]string{mod, version(mod)})
		}
	}
	return in, nil
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// fsType names the filesystem holding path: a tmpfs would make every fsync free and every
// durable figure meaningless, so the report says which it was.
func fsType(path string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	names := map[int64]string{
		0xEF53: "ext4", 0x01021994: "tmpfs", 0x58465342: "xfs", 0x9123683E: "btrfs",
		0x794c7630: "overlayfs", 0x2FC12FC1: "zfs", 0x65735546: "fuse",
	}
	if n, ok := names[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// sqliteVersion asks the linked SQLite for its version.
func sqliteVersion() string {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return "unknown"
	}
	defer db.Close()
	var v string
	if err := db.QueryRow(`SELECT sqlite_version()`).Scan(&v); err != nil {
		return "unknown"
	}
	return v
}
