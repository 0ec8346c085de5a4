package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ultimat3/jobs/store"
)

func init() { retentionTests = append(retentionTests, retentionLinkTests...) }

// parentOf is the store's link of child to its parent, if any.
func parentOf(t *testing.T, s store.Store, child string) (store.ChildLink, bool) {
	t.Helper()
	l, ok, err := s.ParentOf(t.Context(), child)
	if err != nil {
		t.Fatalf("ParentOf(%s): %v", child, err)
	}
	return l, ok
}

var retentionLinkTests = []test{
	// A failed parent is a dead letter an operator may still retry, and its retried replay waits
	// for a child it started before it failed, reading the child's outcome from its row: the
	// child is kept while the parent is, whatever the child's own period says. Once the parent
	// itself is deleted, nothing can wait for the child and it goes like any run.
	{"ChildOfAFailedParentIsKept", func(t *testing.T, s store.Store) {
		parent := finishedAt(t, s, 1, store.StateFailed, at(time.Hour))
		finishedAt(t, s, 2, store.StateCompleted, at(time.Hour))
		link(t, s, store.ChildLink{ParentID: parent.ID, ChildID: runID(2), Name: "kid", CreatedAt: at(0)})
		// The child's state is past its cut-off, the parent's is kept (dead letters for a month).
		p := store.RetentionParams{CompletedBefore: at(2 * time.Hour), CancelledBefore: at(2 * time.Hour)}
		if got := candidates(t, s, p); len(got) != 0 {
			t.Fatalf("candidates %v: the failed parent's child must be kept", got)
		}
		if res := sweep(t, s, p, runID(2)); len(res.Runs) != 0 {
			t.Fatalf("deleted %v: the failed parent's child must be kept", res.Runs)
		}
		// Both past their cut-offs: the parent is listed, the child not while the parent exists.
		all := keepNone(at(2 * time.Hour))
		if got := candidates(t, s, all); !slices.Equal(got, []string{parent.ID}) {
			t.Fatalf("candidates %v, want only the failed parent", got)
		}
		if res := sweep(t, s, all, parent.ID); !slices.Equal(res.Runs, []string{parent.ID}) {
			t.Fatalf("deleted %v, want the failed parent", res.Runs)
		}
		if got := candidates(t, s, all); !slices.Equal(got, []string{runID(2)}) {
			t.Fatalf("after the parent was deleted: candidates %v, want the child", got)
		}
	}},

	// A child's link to its parent is the child's own and goes with it: kept as long as the
	// child is (a live child of a deleted parent still reads its link), deleted with it. Left
	// behind, the children table grew by a row per child run for ever, and a parent kept listing
	// children that no longer exist.
	{"ChildLinkGoesWithItsChild", func(t *testing.T, s store.Store) {
		parent := finishedAt(t, s, 1, store.StateCompleted, at(time.Hour))
		finishedAt(t, s, 2, store.StateCompleted, at(time.Hour))
		live := inState(t, s, 3, store.StateSuspended)
		link(t, s, store.ChildLink{ParentID: parent.ID, ChildID: runID(2), Name: "done", CreatedAt: at(0)})
		link(t, s, store.ChildLink{ParentID: parent.ID, ChildID: live.ID, Name: "live", CreatedAt: at(0)})
		p := keepNone(at(2 * time.Hour))
		if res := sweep(t, s, p, parent.ID, runID(2), live.ID); len(res.Runs) != 2 {
			t.Fatalf("deleted %v, want the parent and its finished child", res.Runs)
		}
		if l, ok := parentOf(t, s, runID(2)); ok {
			t.Errorf("the deleted child's link is left behind: %+v", l)
		}
		if l, ok := parentOf(t, s, live.ID); !ok || l.ParentID != parent.ID {
			t.Errorf("the live child's link: %+v %v, want it kept with its deleted parent's id", l, ok)
		}
		kids, err := s.ChildrenOf(t.Context(), parent.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) != 1 || kids[0].ChildID != live.ID {
			t.Errorf("ChildrenOf the deleted parent: %+v, want only the live child", kids)
		}
	}},
}
