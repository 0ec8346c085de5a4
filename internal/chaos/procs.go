package chaos

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
