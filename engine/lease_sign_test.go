package engine

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/ultimat3/jobs/internal/race"
)

// The pooled signer issues exactly the tokens of the formula every engine process shares
// (HMAC-SHA256 of the length-prefixed run, fence and worker, unpadded base64url), so old and
// new engines on one store honour each other's tokens; and it allocates only the token.
func TestSignerTokens(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	want := func(runID string, fence int64, workerID string) string {
		var in string
		for _, f := range []string{runID, strconv.FormatInt(fence, 10), workerID} {
			in += strconv.Itoa(len(f)) + ":" + f
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(in))
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	e := &Engine{}
	for _, c := range []struct {
		run    string
		fence  int64
		worker string
	}{{"r1", 1, "w"}, {"", 0, ""}, {"01JRUN", -7, "host-1:42"}, {strings.Repeat("x", 2000), 1 << 62, "w"}, {"r", 123456789, strings.Repeat("y", 300)}} {
		for range 2 { // the second from the pool
			if got, w := e.sign(key, c.run, c.fence, c.worker), want(c.run, c.fence, c.worker); got != w {
				t.Fatalf("sign(%.20q, %d, %.20q) = %s, want %s", c.run, c.fence, c.worker, got, w)
			}
		}
	}
	if race.Enabled {
		return // the race detector makes sync.Pool drop items
	}
	if n := testing.AllocsPerRun(100, func() { _ = e.sign(key, "01JRUN", 3, "worker-1") }); n > 1 {
		t.Fatalf("a token costs %.0f allocations, want 1 (the token)", n)
	}
}
