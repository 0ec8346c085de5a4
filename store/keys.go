package store

import "context"

// Keys keeps the engine's secrets in the store every engine process shares, so a lease token
// minted by one engine is honoured by another (a worker's poll and its records may reach
// different processes behind a load balancer).
type Keys interface {
	// KeyEnsure returns the secret stored under name. When there is none, candidate is stored
	// first and returned. Concurrent callers, from any number of processes, all get the same
	// secret: the first one stored wins, and it never changes afterwards.
	KeyEnsure(ctx context.Context, name string, candidate []byte) ([]byte, error)
}
