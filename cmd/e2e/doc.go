// Package e2e holds the end-to-end test of the two binaries: it builds cmd/engine and cmd/worker,
// runs them as processes (on SQLite, and on Postgres when TEST_DATABASE_URL is set) and drives
// them with the engine's CLI as an operator would. It has no code of its own.
package e2e
