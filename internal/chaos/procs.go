package chaos

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
	"syscall"
	"time"
)

// proc is a child process the harness started; it is only ever signalled by its own pid.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func start(log io.Writer, name string, args ...string) (*proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdout = io.Discard
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// kill SIGKILLs the process (by its pid) and waits for it to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// term asks the process to stop and waits up to d before killing it.
func (p *proc) term(d time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		p.kill()
	}
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the module")
	}
	return filepath.Dir(mod), nil
}

// build compiles the engine and the chaos worker into dir.
func build(dir string) (engine, worker string, err error) {
	root, err := moduleRoot()
	if err != nil {
		return "", "", err
	}
	engine, worker = filepath.Join(dir, "engine"), filepath.Join(dir, "chaosworker")
	for out, pkg := range map[string]string{engine: "./cmd/engine", worker: "./internal/chaos/chaosworker"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return engine, worker, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// pgCluster is a throwaway PostgreSQL cluster the harness owns, so it may restart it. Like
// scripts/with-postgres.sh it runs as the postgres user when the harness runs as root (initdb
// refuses root).
type pgCluster struct {
	bin, dir string
	port     int
	runas    []string
}

func startPostgres(ctx context.Context, log io.Writer) (*pgCluster, error) {
	bin := os.Getenv("PGBIN")
	if bin == "" {
		bin = "/usr/lib/postgresql/15/bin"
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		return nil, fmt.Errorf("postgres: no initdb under %s (set PGBIN)", bin)
	}
	dir, err := os.MkdirTemp("", "jobs-chaos-pg-")
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: bin, dir: dir}
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
	if c.port, err = freePort(); err != nil {
		return nil, err
	}
	if err := c.run(ctx, log, filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "postgres", "-A", "trust", "--no-sync"); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\nmax_connections = 200\nlog_min_messages = warning\n", c.port, dir)
	f, err := os.OpenFile(filepath.Join(c.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(conf)
	f.Close()
	if err != nil {
		return nil, err
	}
	return c, c.start(ctx, log)
}

func (c *pgCluster) data() string { return filepath.Join(c.dir, "data") }

// URL is the cluster's connection URL.
func (c *pgCluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *pgCluster) run(ctx context.Context, log io.Writer, args ...string) error {
	all := append(append([]string{}, c.runas...), args...)
	cmd := exec.CommandContext(ctx, all[0], all[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func (c *pgCluster) start(ctx context.Context, log io.Writer) error {
	return c.run(ctx, log, filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "start")
}

// crash stops the cluster the way a crash does (immediate: no checkpoint, connections cut).
func (c *pgCluster) crash(ctx context.Context, log io.Writer) error {
	return c.run(ctx, log, filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-m", "immediate", "-w", "stop")
}

// remove stops the cluster and deletes it.
func (c *pgCluster) remove(log io.Writer) {
	_ = c.crash(context.Background(), log)
	_ = os.RemoveAll(c.dir)
}
