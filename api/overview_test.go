package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
)

// The JSON API serves the console's projections: the overview and the run finder.
func TestOverviewAndSearch(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{Token: "tok"})
	ctx := context.Background()
	var ids []string
	for _, k := range []string{"k1", "k2", "k3"} {
		res, err := b.client.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Queue: "emails", Key: k, NoTenant: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.RunID)
		b.env.Advance(time.Millisecond)
	}
	if _, err := b.env.Engine.Cancel(ctx, ids[1], "test"); err != nil {
		t.Fatal(err)
	}
	ov, err := b.client.Overview(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Queues) != 1 || ov.Queues[0].Queue != "emails" || ov.Queues[0].Window["cancelled"] != 1 || len(ov.Queues[0].Finished) != 15 {
		t.Errorf("overview %+v", ov)
	}
	if ov, err = b.client.Overview(ctx, 10*time.Minute, 5*time.Minute); err != nil || len(ov.Queues[0].Finished) != 2 {
		t.Errorf("overview over 10m by 5m: %+v, %v", ov, err)
	}

	page, err := b.client.SearchRuns(ctx, engine.RunFilter{Search: "k2"})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != ids[1] {
		t.Errorf("search by key: %+v, %v", page, err)
	}
	page, err = b.client.SearchRuns(ctx, engine.RunFilter{State: store.StateReady, Limit: 1})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != ids[2] || page.Next != ids[2] {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	page, err = b.client.SearchRuns(ctx, engine.RunFilter{State: store.StateReady, Limit: 1, Before: page.Next})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != ids[0] {
		t.Errorf("second page: %+v, %v", page, err)
	}
	from := b.env.Clock.Now().Add(-time.Millisecond)
	page, err = b.client.SearchRuns(ctx, engine.RunFilter{CreatedFrom: from})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != ids[2] {
		t.Errorf("created from %s: %+v, %v", from, page, err)
	}

	for _, path := range []string{"/v1/overview?window=x", "/v1/overview?window=1m&bucket=1h", "/v1/search/runs?state=nope",
		"/v1/search/runs?createdFrom=yesterday", "/v1/search/runs?limit=0x", "/v1/search/runs?q=%00"} {
		req, _ := http.NewRequest(http.MethodGet, b.url+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", path, res.StatusCode)
		}
	}
}
