//go:build unix

package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ultimat3/jobs"
)

// One engine per database file. SQLite itself would let a second engine open the file, and both
// would claim, fire timers and expire leases as if alone: the single write connection that the
// store's race-free rules stand on would be two. So Open takes an exclusive, non-blocking flock
// on "<path>.lock" and holds it until Close. The kernel drops it when the process dies, so a
// crash never leaves a stale lock behind, and a second Open in the same process is refused too
// (flock locks belong to the open file, not the process).
type fileLock struct{ f *os.File }

// acquire takes the lock of the database at path (0600, beside the file). The lock is named
// after the database's resolved path, so a second name of the file (a symlinked data directory,
// a symlink to the file) takes the same lock. A hard link is a second name the path cannot show.
func acquire(path string) (*fileLock, error) {
	name := lockName(path)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: open the lock file %s", name)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, jobs.Errorf(jobs.CodeStoreLocked,
				"sqlite: %s is already open by another engine (%s is locked); run one engine per SQLite file, or use Postgres for several", path, name)
		}
		return nil, jobs.Wrap(jobs.CodeDriverUnavailable, err, "sqlite: lock %s", name)
	}
	return &fileLock{f: f}, nil
}

// lockName is "<path>.lock" of path with its symlinks resolved: the file's when it exists, else
// its directory's.
func lockName(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real + ".lock"
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path)) + ".lock"
	}
	return filepath.Clean(path) + ".lock"
}

func (l *fileLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
