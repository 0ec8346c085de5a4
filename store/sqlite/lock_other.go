//go:build !unix

package sqlite

// Without flock the lock is not taken: one engine per file is then the operator's to keep.
type fileLock struct{}

func acquire(string) (*fileLock, error) { return &fileLock{}, nil }

func (*fileLock) release() {}
