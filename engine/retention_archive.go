package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// Archive receives a run and its whole history before retention deletes them. ArchiveRun
// returns only once what it wrote is durable: the delete follows at once.
type Archive interface {
	ArchiveRun(ctx context.Context, run store.Run, events []history.Event) error
}

// DirArchive archives each run as <dir>/<run id>.jsonl, in the dump format `engine history
// dump` prints (history.Load reads it, replay.CheckFile replays it). The file is written under a
// temporary name, fsynced, renamed, and the directory fsynced, so a crash leaves either the whole
// file or none. A second archive of the same run (two engines sweeping at once) replaces the
// first with the same content.
func DirArchive(dir string) (Archive, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("retention archive: %w", err)
	}
	return dirArchive{dir: dir}, nil
}

type dirArchive struct{ dir string }

func (a dirArchive) ArchiveRun(_ context.Context, run store.Run, events []history.Event) error {
	var buf bytes.Buffer
	if err := history.Dump(&buf, events); err != nil {
		return err
	}
	// Run ids are the engine's (UUIDs); Base keeps a hostile one inside dir all the same.
	name := filepath.Join(a.dir, filepath.Base(run.ID)+".jsonl")
	f, err := os.CreateTemp(a.dir, ".archive-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing left to remove
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), name); err != nil {
		return err
	}
	d, err := os.Open(a.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriterArchive archives every run to one stream: each run is a header line
// {"run":"<id>","job":…,"state":…,"events":N} followed by its N lines in the dump format. When w
// has a Sync method (an *os.File), it is called after each run, before the delete.
func WriterArchive(w io.Writer) Archive { return &writerArchive{w: w} }

type writerArchive struct {
	mu sync.Mutex
	w  io.Writer
}

func (a *writerArchive) ArchiveRun(_ context.Context, run store.Run, events []history.Event) error {
	var buf bytes.Buffer
	// Encoded as JSON, not formatted: a job name may hold any character but NUL, and Go's quoting
	// of a control character is not JSON's.
	header := struct {
		Run    string `json:"run"`
		Job    string `json:"job"`
		State  string `json:"state"`
		Events int    `json:"events"`
	}{run.ID, run.Job, string(run.State), len(events)}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(header); err != nil {
		return err
	}
	if err := history.Dump(&buf, events); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.w.Write(buf.Bytes()); err != nil {
		return err
	}
	if s, ok := a.w.(interface{ Sync() error }); ok {
		return s.Sync()
	}
	return nil
}
