package memory

import (
	"context"
	"testing"
)

// A limit of zero or less means all the candidates, and never panics.
func TestFinishedChildrenOfWaitingNonPositiveLimit(t *testing.T) {
	s := New()
	for _, limit := range []int{0, -1, -100} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("limit %d panicked: %v", limit, r)
				}
			}()
			if _, err := s.FinishedChildrenOfWaiting(context.Background(), "jobs.child", limit); err != nil {
				t.Errorf("limit %d: %v", limit, err)
			}
		}()
	}
}
