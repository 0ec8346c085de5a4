package worker

import (
	"log/slog"
	"time"

	"github.com/ultimat3/jobs"
)

// pollRemind is how often a poller that keeps failing the same way says so again at warn.
const pollRemind = time.Minute

// pollFailures keeps a poller's log readable while the engine is away. Each poller retries
// within a second, so an engine down for an hour would otherwise write a warning per queue per
// second (thousands of identical lines). The first failure is a warning; the same failure again
// is at debug, with a warning each pollRemind that counts them; a different failure is a warning
// at once; and the first poll that succeeds after them says, at info, how many failed and for
// how long.
type pollFailures struct {
	n        int
	code     jobs.Code
	since    time.Time
	reminded time.Time
}

func (f *pollFailures) failed(log *slog.Logger, queue string, err error, now time.Time) {
	code := jobs.CodeOf(err)
	switch {
	case f.n == 0:
		f.since, f.code, f.reminded = now, code, now
		log.Warn("jobs.poll.failed", "queue", queue, "err", err)
	case code != f.code:
		f.code, f.reminded = code, now
		log.Warn("jobs.poll.failed", "queue", queue, "err", err, "failures", f.n+1, "since", f.since)
	case now.Sub(f.reminded) >= pollRemind:
		f.reminded = now
		log.Warn("jobs.poll.failed", "queue", queue, "err", err, "failures", f.n+1, "since", f.since)
	default:
		log.Debug("jobs.poll.failed", "queue", queue, "err", err)
	}
	f.n++
}

func (f *pollFailures) recovered(log *slog.Logger, queue string, now time.Time) {
	if f.n == 0 {
		return
	}
	log.Info("jobs.poll.recovered", "queue", queue, "failures", f.n, "after", now.Sub(f.since).Round(time.Millisecond))
	*f = pollFailures{}
}
