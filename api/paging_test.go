package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
)

// Every run listing reads its page by one rule (package paging): a limit given is 1 to 500 (0
// is refused everywhere, not the default on some routes), and a cursor given is a run id, so
// before=garbage is X_BAD_REQUEST rather than the first page. A cursor the previous page gave
// pages on, and one naming no run (deleted since) is still a place to page from.
func TestListingPageParameters(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	var ids []string
	for _, k := range []string{"k1", "k2", "k3"} {
		res, err := b.env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Key: k, NoTenant: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.RunID)
		b.env.Advance(time.Millisecond)
	}
	if _, err := b.env.Engine.Cancel(t.Context(), ids[0], "test"); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, []byte) {
		st, _, out := b.call(t, http.MethodGet, path, "", "", nil)
		return st, out
	}
	for _, route := range []string{"/v1/runs", "/v1/dead-letters", "/v1/search/runs"} {
		for _, q := range []string{"limit=0", "limit=-1", "limit=501", "limit=x", "before=garbage", "before=zz",
			"before=" + strings.ToUpper(ids[1]), "before=" + ids[1][:35], "before=" + ids[1] + "0", "limit=2&before=zz"} {
			if st, out := get(route + "?" + q); st != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeBadRequest {
				t.Errorf("GET %s?%s = %d %s; want 400 X_BAD_REQUEST", route, q, st, out)
			}
		}
		for _, q := range []string{"", "limit=1", "limit=500", "before=" + ids[1], "before=00000000-0000-7000-8000-000000000000"} {
			if st, out := get(route + "?" + q); st != http.StatusOK {
				t.Errorf("GET %s?%s = %d %s; want 200", route, q, st, out)
			}
		}
	}
	for _, q := range []string{"limit=0", "limit=10001"} {
		if st, out := get("/v1/backfills?" + q); st != http.StatusBadRequest || jsonCode(t, out) != jobs.CodeBadRequest {
			t.Errorf("GET /v1/backfills?%s = %d %s; want 400 X_BAD_REQUEST", q, st, out)
		}
	}
	// Paging by the cursor a page gives, on both listings.
	for _, route := range []string{"/v1/runs", "/v1/search/runs"} {
		var first, second api.RunPage
		st, out := get(route + "?limit=2")
		if st != http.StatusOK || json.Unmarshal(out, &first) != nil || len(first.Runs) != 2 || first.Next != ids[1] {
			t.Fatalf("GET %s?limit=2 = %d %s", route, st, out)
		}
		st, out = get(route + "?limit=2&before=" + first.Next)
		if st != http.StatusOK || json.Unmarshal(out, &second) != nil || len(second.Runs) != 1 || second.Runs[0].ID != ids[0] {
			t.Fatalf("GET %s's second page = %d %s", route, st, out)
		}
	}
	// The client sends what it is given and nothing for a limit of 0 (the default): it still
	// reads every listing.
	if _, err := b.client.ListRuns(t.Context(), store.ListParams{}); err != nil {
		t.Error(err)
	}
	if _, err := b.client.DeadLetters(t.Context(), store.ListParams{Limit: 1}); err != nil {
		t.Error(err)
	}
	if _, err := b.client.SearchRuns(t.Context(), engine.RunFilter{}); err != nil {
		t.Error(err)
	}
	if _, err := b.client.ListRuns(t.Context(), store.ListParams{Before: "zz"}); jobs.CodeOf(err) != jobs.CodeBadRequest {
		t.Errorf("the client's ListRuns before zz: %v; want X_BAD_REQUEST", err)
	}
}
