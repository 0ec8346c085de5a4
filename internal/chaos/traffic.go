package chaos

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// The liveness traffic a worker sends: its heartbeats (lease renewals) and its session requests
// (the long-held connection whose drop tells the engine the worker died). Fast reclaim rides on
// the session, and must not cost more than twice the heartbeat traffic of the lease alone. Each
// chaos worker tallies its requests as single bytes appended to one shared file (an append of one
// byte is atomic and reaches the kernel at once, so a SIGKILLed worker's count survives it): a
// lower-case byte as a request leaves, an upper-case one when it never reached the engine (the
// engine was down), so a worker retrying into a dead engine is not counted as traffic to it.
//
// The yardstick is the lease-only fleet at defaults: one renewal per worker per heartbeat
// interval (10s) while it holds a claim, and a worker under load always does. The heartbeat
// interval did not change, so what the session adds is its own requests:
// (yardstick + session requests) / yardstick, over the workers' lifetimes.

// defaultHeartbeat is the worker's renewal interval at the default lease (30s / 3).
const defaultHeartbeat = 10 * time.Second

const (
	tallyHeartbeat = 'h'
	tallySession   = 's'
	// refused: subtracted, the request never reached the engine.
	tallyHeartbeatRefused = 'H'
	tallySessionRefused   = 'S'
	// cut: a session the engine's death or drain ended; the worker's next attend is a reconnect.
	tallySessionCut = 'r'
)

// tallying counts the liveness requests that pass through it.
type tallying struct {
	next http.RoundTripper
	f    *os.File
}

func (t tallying) RoundTrip(r *http.Request) (*http.Response, error) {
	var sent, refused byte
	switch r.URL.Path {
	case "/v1/worker/heartbeat":
		sent, refused = tallyHeartbeat, tallyHeartbeatRefused
	case "/v1/worker/session":
		sent, refused = tallySession, tallySessionRefused
	default:
		return t.next.RoundTrip(r)
	}
	_, _ = t.f.Write([]byte{sent})
	res, err := t.next.RoundTrip(r)
	switch {
	case err != nil && isRefused(err):
		_, _ = t.f.Write([]byte{refused})
	case sent == tallySession && (err != nil || res.StatusCode != http.StatusOK) && r.Context().Err() == nil:
		// The engine went away under an attended session (killed, or draining): the worker
		// attends again because of the disruption, not because its session needs it.
		_, _ = t.f.Write([]byte{tallySessionCut})
	}
	return res, err
}

// isRefused reports whether a request failed before the engine could see it: no listener (the
// engine is down), or the connection could not be made.
func isRefused(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial")
}

// TallyingClient is an HTTP client for api.NewClient (the same transport settings as its
// default) that tallies liveness requests in the file at path.
func TallyingClient(path string) (*http.Client, func() error, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tallying{next: t, f: f}}, f.Close, nil
}

// readTally counts the heartbeats and session requests tallied in the file at path, and the
// sessions an engine restart cut (each followed by a reconnect).
func readTally(path string) (heartbeats, sessions, cut int, err error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, 0, 0, nil
	}
	heartbeats = bytes.Count(b, []byte{tallyHeartbeat}) - bytes.Count(b, []byte{tallyHeartbeatRefused})
	sessions = bytes.Count(b, []byte{tallySession}) - bytes.Count(b, []byte{tallySessionRefused})
	return heartbeats, sessions, bytes.Count(b, []byte{tallySessionCut}), err
}

// trafficRatio is the liveness traffic over the yardstick: a renewal per heartbeat interval for
// workerTime, plus the session requests.
func trafficRatio(workerTime time.Duration, sessions int) float64 {
	yard := float64(workerTime) / float64(defaultHeartbeat)
	if yard <= 0 {
		return 0
	}
	return (yard + float64(sessions)) / yard
}
