package engine

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"

	"github.com/ultimat3/jobs"
)

// leaseKeyName is the store key the lease tokens are signed with.
const leaseKeyName = "lease-token-v1"

// A lease token binds a claim to the worker it was given to. It is an HMAC, under a secret kept
// in the store, of (run, fence, worker): the engine recomputes it on every record and heartbeat
// instead of storing it, so the hot path writes nothing more, every engine process sharing the
// store honours every other's tokens, and nothing the admin API can show (the run id, its fence,
// its worker id) is enough to forge one. Fencing stays underneath: a token for an old fence is
// still refused by the store as a stale claim.

// leaseKey returns the signing secret, stored on first use by whichever engine process came
// first.
func (e *Engine) leaseKey(ctx context.Context) ([]byte, error) {
	e.keyMu.Lock()
	defer e.keyMu.Unlock()
	if e.key != nil {
		return e.key, nil
	}
	candidate := make([]byte, 32)
	if _, err := rand.Read(candidate); err != nil {
		return nil, jobs.Wrap(jobs.CodeInternal, err, "generate the lease key")
	}
	k, err := e.store.KeyEnsure(ctx, leaseKeyName, candidate)
	if err != nil {
		return nil, err
	}
	if len(k) < 16 {
		return nil, jobs.Errorf(jobs.CodeInvariant, "the stored lease key is %d bytes", len(k))
	}
	e.key = k
	return k, nil
}

// signLease issues the token of a claim and remembers it as verified: the token is this
// engine's own, so the claim's first record need not recompute its HMAC (one per claim saved).
func (e *Engine) signLease(key []byte, runID string, fence int64, workerID string) string {
	token := e.sign(key, runID, fence, workerID)
	e.verified.Add(runID, verifiedClaim{fence, workerID, token})
	return token
}

// sign is the token of (run, fence, worker) under key, computed with a pooled signer. The pool's
// HMACs are keyed with the engine's one lease key, which never changes in its life.
func (e *Engine) sign(key []byte, runID string, fence int64, workerID string) string {
	s, _ := e.hmacs.Get().(*signer)
	if s == nil {
		s = &signer{m: hmac.New(sha256.New, key)}
	}
	token := s.token(runID, fence, workerID)
	e.hmacs.Put(s)
	return token
}

// signer is a keyed HMAC with the scratch space of a token, pooled together: the input, the
// sum and the encoding were three allocations of every claim (the input and the sum escape
// through the hash's interface), beside the token's own string.
type signer struct {
	m   hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

// tokenLen is the unpadded base64url length of a SHA-256 sum.
const tokenLen = (sha256.Size*8 + 5) / 6

func (s *signer) token(runID string, fence int64, workerID string) string {
	s.m.Reset()
	// Length-prefixed fields: no two (run, fence, worker) triples share an input.
	var num [20]byte
	f := strconv.AppendInt(num[:0], fence, 10)
	b := appendField(s.buf[:0], runID)
	b = strconv.AppendInt(b, int64(len(f)), 10)
	b = append(append(b, ':'), f...)
	b = appendField(b, workerID)
	s.m.Write(b)
	if cap(b) <= 1024 {
		s.buf = b
	}
	var out [tokenLen]byte
	base64.RawURLEncoding.Encode(out[:], s.m.Sum(s.sum[:0]))
	return string(out[:])
}

func appendField(b []byte, f string) []byte {
	b = strconv.AppendInt(b, int64(len(f)), 10)
	return append(append(b, ':'), f...)
}

// verifiedClaim is a claim whose token was checked, remembered so the claim's next records cost
// no HMAC: a step's record is the engine's hottest path.
type verifiedClaim struct {
	fence  int64
	worker string
	token  string
}

// checkLease refuses a write or renewal whose token was not issued for this run, fence and
// worker. It reads nothing but the (cached) key, so a refusal costs no store round trip.
func (e *Engine) checkLease(ctx context.Context, runID string, fence int64, workerID, token string) error {
	if token == "" {
		return jobs.Errorf(jobs.CodeLeaseInvalid, "run %s: the request carries no lease token", runID)
	}
	// The remembered token is compared in constant time, as the HMAC is: a caller probing for it
	// learns nothing from how long a refusal takes.
	if v, ok := e.verified.Get(runID); ok && v.fence == fence && v.worker == workerID &&
		hmac.Equal([]byte(v.token), []byte(token)) {
		return nil
	}
	k, err := e.leaseKey(ctx)
	if err != nil {
		return err
	}
	want := e.sign(k, runID, fence, workerID)
	if !hmac.Equal([]byte(want), []byte(token)) {
		return jobs.Errorf(jobs.CodeLeaseInvalid, "run %s: the lease token was not issued for fence %d to worker %q", runID, fence, workerID)
	}
	e.verified.Add(runID, verifiedClaim{fence, workerID, token})
	return nil
}
