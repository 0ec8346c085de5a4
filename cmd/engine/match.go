package main

import (
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/cmd/internal/cli"
	"github.com/ultimat3/jobs/history"
)

// matchFlag parses `events publish --match`: a JSON object of the fields waits match on, sent
// beside the payload (the engine then matches on them only).
func matchFlag(doc string) (map[string]any, error) {
	b, err := jobs.FromJSON([]byte(doc))
	if err != nil {
		return nil, cli.Usage("--match is not JSON: %s", strings.TrimPrefix(err.Error(), string(jobs.CodeBadRequest)+": "))
	}
	var m map[string]any
	if err := jobs.Decode(b, &m); err != nil || m == nil {
		return nil, cli.Usage(`--match must be a JSON object of field → value, such as {"orderId":"o-1"}`)
	}
	// A field's value may be an object or an array: the engine matches it by its canonical JSON
	// (history.MatchKeys), as a wait's jobs.Match does. Decoded from msgpack, a nested object is
	// a map[any]any, which the client's JSON encoding of the fields cannot take: made JSON's.
	for k, v := range m {
		m[k] = history.JSONable(v)
	}
	return m, nil
}
