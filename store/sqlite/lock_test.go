//go:build unix

package sqlite_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store/sqlite"
)

// A second open of a file an engine holds is refused with X_STORE_LOCKED and changes nothing;
// once the first closes, the file opens again.
func TestSecondOpenIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	first, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(context.Background(), sqlite.Config{Path: path}); !jobs.HasCode(err, jobs.CodeStoreLocked) {
		t.Fatalf("second open: %v, want X_STORE_LOCKED", err)
	}
	// The refused open did not disturb the first store.
	if _, err := first.RunGet(context.Background(), "none"); !jobs.HasCode(err, jobs.CodeRunNotFound) {
		t.Fatalf("the first store after a refused open: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	_ = again.Close()
}

// Two processes: while a child holds the file, the parent's open is refused; once the child is
// killed (no Close), the kernel has dropped its lock and the file opens: a crash leaves no stale
// lock behind.
func TestSecondProcessIsRefusedAndAKilledHolderLeavesNoLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	child := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$")
	child.Env = append(os.Environ(), "JOBS_LOCK_HOLDER="+path)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "holding\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	if _, err := sqlite.Open(context.Background(), sqlite.Config{Path: path}); !jobs.HasCode(err, jobs.CodeStoreLocked) {
		t.Fatalf("open while another process holds the file: %v, want X_STORE_LOCKED", err)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("open after the holder was killed: %v", err)
	}
	_ = st.Close()
}

// TestLockHolderProcess is the child of the test above: it opens the file and waits to be killed.
func TestLockHolderProcess(t *testing.T) {
	path := os.Getenv("JOBS_LOCK_HOLDER")
	if path == "" {
		t.Skip("the child process of TestSecondProcessIsRefusedAndAKilledHolderLeavesNoLock")
	}
	if _, err := sqlite.Open(context.Background(), sqlite.Config{Path: path}); err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("holding\n")
	select {}
}
