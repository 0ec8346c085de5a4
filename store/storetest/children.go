package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

func link(t *testing.T, s store.Store, l store.ChildLink) store.ChildLink {
	t.Helper()
	got, err := s.ChildLinkAdd(t.Context(), l)
	if err != nil {
		t.Fatalf("ChildLinkAdd(%s → %s): %v", l.ParentID, l.ChildID, err)
	}
	return got
}

var childTests = []test{
	{"LinksReadBothWays", func(t *testing.T, s store.Store) {
		at := appliedAt.Truncate(time.Millisecond)
		a := link(t, s, store.ChildLink{ParentID: "p", ChildID: "c2", Name: "two", CreatedAt: at.Add(time.Second)})
		link(t, s, store.ChildLink{ParentID: "p", ChildID: "c1", Name: "one", Detached: true, CreatedAt: at})
		link(t, s, store.ChildLink{ParentID: "other", ChildID: "c3", Name: "x", CreatedAt: at})
		if a.ParentID != "p" || a.Name != "two" || !a.CreatedAt.Equal(at.Add(time.Second)) {
			t.Errorf("ChildLinkAdd returned %+v", a)
		}
		kids, err := s.ChildrenOf(t.Context(), "p")
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) != 2 || kids[0].ChildID != "c1" || kids[1].ChildID != "c2" {
			t.Fatalf("ChildrenOf(p) = %+v, want c1 then c2 (oldest first)", kids)
		}
		if !kids[0].Detached || kids[1].Detached || kids[0].Name != "one" {
			t.Errorf("ChildrenOf(p) lost a field: %+v", kids)
		}
		l, ok, err := s.ParentOf(t.Context(), "c1")
		if err != nil || !ok || l.ParentID != "p" || !l.Detached || !l.CreatedAt.Equal(at) {
			t.Errorf("ParentOf(c1) = %+v, %v, %v", l, ok, err)
		}
		if _, ok, err := s.ParentOf(t.Context(), "nobody"); ok || err != nil {
			t.Errorf("ParentOf(nobody) = %v, %v; want no link", ok, err)
		}
		if kids, err := s.ChildrenOf(t.Context(), "childless"); len(kids) != 0 || err != nil {
			t.Errorf("ChildrenOf(childless) = %v, %v", kids, err)
		}
	}},

	// A resend writes the same link again; a second parent never takes a child over.
	{"FirstLinkWins", func(t *testing.T, s store.Store) {
		first := store.ChildLink{ParentID: "p1", ChildID: "c", Name: "n", CreatedAt: appliedAt}
		link(t, s, first)
		link(t, s, first)
		got := link(t, s, store.ChildLink{ParentID: "p2", ChildID: "c", Name: "m", Detached: true, CreatedAt: appliedAt})
		if got.ParentID != "p1" || got.Name != "n" || got.Detached {
			t.Errorf("the second parent's link returned %+v, want p1's", got)
		}
		if kids, _ := s.ChildrenOf(t.Context(), "p1"); len(kids) != 1 {
			t.Errorf("p1 has %d children after a repeated link, want 1", len(kids))
		}
		if kids, _ := s.ChildrenOf(t.Context(), "p2"); len(kids) != 0 {
			t.Errorf("p2 took the child over: %+v", kids)
		}
	}},

	{"ConcurrentLinksAgree", func(t *testing.T, s store.Store) {
		var wg sync.WaitGroup
		got := make([]store.ChildLink, 8)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := s.ChildLinkAdd(t.Context(), store.ChildLink{ParentID: string(rune('a' + i)), ChildID: "c", Name: "n", CreatedAt: appliedAt})
				if err != nil {
					t.Error(err)
				}
				got[i] = l
			}()
		}
		wg.Wait()
		for _, l := range got {
			if l.ParentID != got[0].ParentID {
				t.Fatalf("concurrent links returned parents %s and %s", got[0].ParentID, l.ParentID)
			}
		}
	}},

	// FinishedChildrenOfWaiting lists the finished children of parents that wait on the event,
	// by parent then child, at most limit; a limit of zero or less lists them all, on every
	// store (SQLite took a negative one for all and zero for none; Postgres refused a negative
	// one and took zero for none).
	{"FinishedChildrenOfWaitingLimit", func(t *testing.T, s store.Store) {
		const event = "kid.done"
		waiting(t, s, 1, event, nil, base)
		waiting(t, s, 2, event, nil, base)
		waiting(t, s, 3, "other", nil, base)
		for _, c := range []struct{ parent, child int }{{1, 12}, {1, 11}, {2, 21}, {3, 31}, {1, 13}} {
			link(t, s, store.ChildLink{ParentID: runID(c.parent), ChildID: runID(c.child), Name: "kid", CreatedAt: appliedAt})
		}
		finishedAt(t, s, 11, store.StateCompleted, appliedAt)
		finishedAt(t, s, 12, store.StateFailed, appliedAt)
		finishedAt(t, s, 21, store.StateCancelled, appliedAt)
		finishedAt(t, s, 31, store.StateCompleted, appliedAt) // its parent waits on another event
		running(t, s, 13)                                     // not finished
		all := []string{runID(11), runID(12), runID(21)}
		parentOf := map[string]string{runID(11): runID(1), runID(12): runID(1), runID(21): runID(2)}
		for _, c := range []struct {
			limit int
			want  []string
		}{{0, all}, {-1, all}, {-500, all}, {2, all[:2]}, {1, all[:1]}, {3, all}, {10, all}} {
			links, err := s.FinishedChildrenOfWaiting(t.Context(), event, c.limit)
			if err != nil {
				t.Errorf("limit %d: %v", c.limit, err)
				continue
			}
			var got []string
			for _, l := range links {
				got = append(got, l.ChildID)
				if want := parentOf[l.ChildID]; l.ParentID != want {
					t.Errorf("limit %d: child %s has parent %s, want %s", c.limit, l.ChildID, l.ParentID, want)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("limit %d: children %v, want %v", c.limit, got, c.want)
			}
		}
	}},

	{"RefusesEmptyIDs", func(t *testing.T, s store.Store) {
		if _, err := s.ChildLinkAdd(t.Context(), store.ChildLink{ParentID: "p"}); err == nil {
			t.Error("a link without a child id was accepted")
		}
	}},
}
