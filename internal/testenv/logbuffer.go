package testenv

import (
	"bytes"
	"log/slog"
	"sync"
)

// LogBuffer collects log output for assertions on the seed's signal names
// (jobs.lease.lost, jobs.timeout.abandoned, …); safe for a logger's writes and a test's reads.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger returns a text logger writing into the buffer.
func (l *LogBuffer) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
