//go:build !race

// Package race reports whether the binary was built with the race detector, for tests whose
// figures it changes (it makes sync.Pool drop items on purpose, so allocation counts rise).
package race

// Enabled is true in a -race build.
const Enabled = false
