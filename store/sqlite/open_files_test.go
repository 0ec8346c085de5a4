//go:build unix

package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ultimat3/jobs"
)

// A second name of the database (a symlinked data directory, a symlink to the file) takes the
// same lock as the first: a second engine through it is X_STORE_LOCKED.
func TestLockFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "jobs.db")
	first, err := Open(t.Context(), Config{Path: real})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "jobs-link.db")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "link", "jobs.db"), filepath.Join(dir, "jobs-link.db"),
		filepath.Join(dir, "real", ".", "jobs.db")} {
		s, err := Open(t.Context(), Config{Path: p})
		if err == nil {
			s.Close()
		}
		if !jobs.HasCode(err, jobs.CodeStoreLocked) {
			t.Errorf("second engine through %s: %v, want X_STORE_LOCKED", p, err)
		}
	}
	// A symlinked directory before the file exists locks the target too.
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link2")); err != nil {
		t.Fatal(err)
	}
	a, err := Open(t.Context(), Config{Path: filepath.Join(dir, "link2", "new.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := os.Stat(filepath.Join(dir, "real", "new.db.lock")); err != nil {
		t.Errorf("lock of a new file through a symlinked directory: %v", err)
	}
}

// The data directory Open creates is 0700; the database, its WAL and its lock are 0600. A
// directory that already exists keeps its mode.
func TestOpenCreatesPrivateFiles(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	path := filepath.Join(dir, "jobs.db")
	s, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.KeyEnsure(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{dir: 0o700, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600, path + ".lock": 0o600}
	for p, m := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode().Perm() != m {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), m)
		}
	}
	s.Close()

	shared := filepath.Join(root, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err = Open(t.Context(), Config{Path: filepath.Join(shared, "jobs.db")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi, _ := os.Stat(shared); fi.Mode().Perm() != 0o755 {
		t.Errorf("an existing directory's mode changed to %v", fi.Mode().Perm())
	}
}

// A read-only open of a missing file is refused and creates neither the file nor its directory.
func TestReadOnlyOpenOfAMissingFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	path := filepath.Join(dir, "jobs.db")
	s, err := Open(t.Context(), Config{Path: path, ReadOnly: true})
	if err == nil {
		s.Close()
		t.Fatal("read-only open of a missing file succeeded")
	}
	if !jobs.HasCode(err, jobs.CodeDriverUnavailable) || !strings.Contains(err.Error(), "no database there") {
		t.Errorf("read-only open of a missing file: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("read-only open created %s", dir)
	}
}

// A path beginning with "//" (the root, on POSIX) opens.
func TestPathWithLeadingDoubleSlash(t *testing.T) {
	p := "/" + filepath.Join(t.TempDir(), "dbl", "jobs.db")
	s, err := Open(t.Context(), Config{Path: p})
	if err != nil {
		t.Fatalf("%q: %v", p, err)
	}
	s.Close()
	if got := dsn("//a/b.db"); !strings.HasPrefix(got, "file:/a/b.db?") {
		t.Errorf("dsn of //a/b.db: %s", got)
	}
}
