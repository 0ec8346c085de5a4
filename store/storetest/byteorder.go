package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

// byteOrderTests: the listings that promise an order give it in the engine's byte order (Go's
// string order), whatever the database's collation: a display, a stable JSON answer and
// store.SortFinishedCounts all assume it. Mixed case is where a language collation differs
// ("a" < "B" in en-US, "B" < "a" in bytes).
var byteOrderTests = []test{
	{"ScheduleList", func(t *testing.T, s store.Store) {
		names := []string{"c", "B", "a", "D"}
		initSchedules(t, s, time.Unix(0, 0).UTC(), names...)
		sts, err := s.ScheduleList(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, st := range sts {
			got = append(got, st.Name)
		}
		if want := []string{"B", "D", "a", "c"}; !slices.Equal(got, want) {
			t.Errorf("ScheduleList names %q, want %q (byte order)", got, want)
		}
	}},
	{"QueueStats", func(t *testing.T, s store.Store) {
		create(t, s, inQueue(1, "c", 0), inQueue(2, "B", 0), inQueue(3, "a", 0), inQueue(4, "D", 0))
		stats, err := s.QueueStats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, q := range stats {
			got = append(got, q.Queue)
		}
		if want := []string{"B", "D", "a", "c"}; !slices.Equal(got, want) {
			t.Errorf("QueueStats queues %q, want %q (byte order)", got, want)
		}
	}},
}
