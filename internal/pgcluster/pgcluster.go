// Package pgcluster starts throwaway PostgreSQL clusters for harnesses and tests that must crash
// or restart the server, which the suite's shared cluster (scripts/with-postgres.sh) cannot be
// put through. Like that script, a cluster runs as the postgres user when the caller is root
// (initdb refuses root), on a free loopback port, in a temp dir of its own, with fsync on.
package pgcluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// Cluster is one throwaway cluster. Its methods stop only the server it started.
type Cluster struct {
	bin, dir string
	port     int
	runas    []string
	log      io.Writer
}

// Bin is where the PostgreSQL 15 binaries are: $PGBIN, or Debian's directory.
func Bin() string {
	if bin := os.Getenv("PGBIN"); bin != "" {
		return bin
	}
	return "/usr/lib/postgresql/15/bin"
}

// Available reports whether initdb is there to start a cluster with.
func Available() bool {
	_, err := os.Stat(filepath.Join(Bin(), "initdb"))
	return err == nil
}

// Start creates a cluster and starts it. conf lines are appended to its postgresql.conf. The
// servers' and tools' output goes to log (io.Discard if nil).
func Start(ctx context.Context, log io.Writer, conf ...string) (*Cluster, error) {
	if log == nil {
		log = io.Discard
	}
	bin := Bin()
	if !Available() {
		return nil, fmt.Errorf("postgres: no initdb under %s (set PGBIN)", bin)
	}
	dir, err := os.MkdirTemp("", "jobs-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, log: log}
	if os.Geteuid() == 0 {
		c.runas = []string{"runuser", "-u", "postgres", "--"}
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if c.port, err = FreePort(); err != nil {
		return nil, err
	}
	if err := c.run(ctx, filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "postgres", "-A", "trust", "--no-sync"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	lines := append([]string{"listen_addresses = '127.0.0.1'", fmt.Sprintf("port = %d", c.port),
		fmt.Sprintf("unix_socket_directories = '%s'", dir), "max_connections = 200", "log_min_messages = warning"}, conf...)
	f, err := os.OpenFile(filepath.Join(c.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString("\n" + strings.Join(lines, "\n") + "\n")
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// URL is the connection URL of the cluster's postgres database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *Cluster) run(ctx context.Context, args ...string) error {
	all := append(append([]string{}, c.runas...), args...)
	cmd := exec.CommandContext(ctx, all[0], all[1:]...)
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// Start starts the stopped cluster and waits until it accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	return c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "start")
}

// Crash stops the cluster the way a crash does (immediate: no checkpoint, connections cut).
func (c *Cluster) Crash(ctx context.Context) error {
	return c.run(ctx, filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-m", "immediate", "-w", "stop")
}

// Remove stops the cluster and deletes it.
func (c *Cluster) Remove() {
	_ = c.Crash(context.Background())
	_ = os.RemoveAll(c.dir)
}

// FreePort is a loopback port free now, for a cluster or any other server a harness starts.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ServerLog is what the server has logged so far, for a test to show when it fails.
func (c *Cluster) ServerLog() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	return string(b)
}
