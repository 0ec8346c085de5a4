package history_test

import (
	"math"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
)

// A time in a match is one pair whatever the zone of the process that makes it. A wait's pairs
// are made by the worker (replay) and a payload's by the engine, often two machines: msgpack
// decodes a timestamp in the process's local zone, and the pair used to carry that zone's offset
// ("2023-12-31T19:00:00-05:00" on one side, "2024-01-01T00:00:00Z" on the other), so the event
// never reached the wait. Not parallel: it sets time.Local, and restores it before returning.
func TestATimeMatchesWhateverTheProcessZone(t *testing.T) {
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	goPayload, err := jobs.Encode(map[string]any{"at": at, "list": []any{at}})
	if err != nil {
		t.Fatal(err)
	}
	jsonPayload, err := jobs.FromJSON([]byte(`{"at":"2024-01-01T00:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Local
	defer func() { time.Local = old }()
	var pairs [][]string
	for _, zone := range []*time.Location{time.UTC, time.FixedZone("west", -5*3600), time.FixedZone("east", 9*3600)} {
		time.Local = zone
		wait, err := history.MatchKeys(map[string]any{"at": at, "list": []any{at}})
		if err != nil {
			t.Fatal(err)
		}
		fields, err := history.FieldKeys(goPayload)
		if err != nil {
			t.Fatal(err)
		}
		if !history.Matches(wait, fields) {
			t.Errorf("zone %s: the payload's fields %q do not match the wait's %q", zone, fields, wait)
		}
		pairs = append(pairs, wait)
		atOnly, _ := history.MatchKeys(map[string]any{"at": at.In(zone)})
		jsonFields, _ := history.FieldKeys(jsonPayload)
		if !history.Matches(atOnly, jsonFields) {
			t.Errorf("zone %s: a JSON payload's %q does not match the wait's %q", zone, jsonFields, atOnly)
		}
	}
	for _, p := range pairs[1:] {
		if !history.Matches(p, pairs[0]) || !history.Matches(pairs[0], p) {
			t.Errorf("one instant, two pairs: %q and %q", pairs[0], p)
		}
	}
}

// The most negative int64, -2^63, is a whole float64 too, and the two are one pair, as every other
// whole number is ("1, int64(1) and 1.0 are equal"). Its float used to be written
// -9.223372036854776e+18, since only magnitudes below 2^63 were written as integers.
func TestTheMostNegativeInt64MatchesItsFloat(t *testing.T) {
	t.Parallel()
	ints, err := history.MatchKeys(map[string]any{"n": int64(math.MinInt64)})
	if err != nil {
		t.Fatal(err)
	}
	floats, err := history.MatchKeys(map[string]any{"n": float64(math.MinInt64)})
	if err != nil {
		t.Fatal(err)
	}
	if ints[0] != floats[0] {
		t.Fatalf("int64 %q, float64 %q: want one pair", ints[0], floats[0])
	}
}
