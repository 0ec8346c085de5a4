package testenv

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter returns the value of the counter family name's series whose labels include every one
// of want (0 when no series matches).
func Counter(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			ls := map[string]string{}
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if ls[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
