package main

import (
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/cmd/internal/cli"
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
	return m, nil
}
