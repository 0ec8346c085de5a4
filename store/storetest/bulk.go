package storetest

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/store"
)

// bulkItems is larger than any backend's threshold for its bulk path (Postgres streams from 64),
// so every backend's large-batch code runs here, not its RunCreate fallback.
const bulkItems = 200

func bulkCreate(t *testing.T, s store.Store, ps []store.CreateRunParams) []store.CreateRunResult {
	t.Helper()
	res, err := s.RunCreateBulk(t.Context(), ps)
	if err != nil {
		t.Fatalf("RunCreateBulk: %v", err)
	}
	if len(res) != len(ps) {
		t.Fatalf("RunCreateBulk: %d results for %d runs", len(res), len(ps))
	}
	return res
}

// bulkParams is runs from..from+n-1 (runParams), every fifth one delayed.
func bulkParams(from, n int) []store.CreateRunParams {
	ps := make([]store.CreateRunParams, n)
	for i := range ps {
		ps[i] = runParams(from + i)
		if i%5 == 4 {
			ps[i].Run.State = store.StateDelayed
			ps[i].Timer = &store.Timer{Key: "delay", DueAt: sleepUntil}
		}
	}
	return ps
}

var bulkTests = []test{
	{"CreatesEveryItemWithItsRunStarted", func(t *testing.T, s store.Store) {
		ps := bulkParams(1, bulkItems)
		for i := range ps { // the columns other features add to a run travel the bulk path too
			ps[i].Run.Priority = i%7 - 3
			ps[i].Run.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			ps[i].Run.TraceState = "k=v"
		}
		res := bulkCreate(t, s, ps)
		for i, p := range ps {
			r := res[i]
			if r.Deduped || r.Run.ID != p.Run.ID {
				t.Fatalf("item %d: Deduped %v, run %s; want a new run %s", i, r.Deduped, r.Run.ID, p.Run.ID)
			}
			for what, got := range map[string]store.Run{"result": r.Run, "RunGet": get(t, s, p.Run.ID)} {
				if got.Job != p.Run.Job || got.Queue != p.Run.Queue || got.Key != p.Run.Key ||
					got.Tenant != p.Run.Tenant || got.State != p.Run.State || got.Attempt != 1 ||
					got.LastSeq != 1 || !bytes.Equal(got.Input, p.Run.Input) || got.Priority != p.Run.Priority ||
					got.TraceParent != p.Run.TraceParent || got.TraceState != p.Run.TraceState {
					t.Fatalf("item %d, %s: %+v does not hold what was created", i, what, got)
				}
				wantTime(t, what+" ReadyAt", got.ReadyAt, p.Run.ReadyAt)
				wantTime(t, what+" CreatedAt", got.CreatedAt, p.Run.CreatedAt)
			}
			evs := events(t, s, p.Run.ID)
			wantKinds(t, "history", evs, history.KindRunStarted)
			if len(evs) == 1 && !bytes.Equal(evs[0].Data, p.Started.Data) {
				t.Fatalf("item %d: RunStarted's data was not kept", i)
			}
		}
		// The ready items are claimable; the delayed ones wait for their timers.
		if got := claim(t, s, claimParams("w", 10, ps[0].Run.Queue, ps[4].Run.Queue)); len(got) != 1 || got[0].ID != ps[0].Run.ID {
			t.Errorf("claimed %v, want only the ready item %s", ids(got), ps[0].Run.ID)
		}
		if due, ok := timerNext(t, s); !ok || !due.Equal(sleepUntil) {
			t.Errorf("TimerNext = %v, %v; want the delayed items' timer %v", due, ok, sleepUntil)
		}
	}},

	{"DedupesPerItem", func(t *testing.T, s store.Store) {
		// Live holders of three items' keys, and a finished run that holds nothing.
		live := map[int]store.Run{}
		for i, st := range map[int]store.State{3: store.StateReady, 7: store.StateRunning, 11: store.StateSuspended} {
			live[i] = inState(t, s, 10_000+i, st)
		}
		gone := inState(t, s, 20_000, store.StateCancelled)
		ps := bulkParams(1, bulkItems)
		for i, r := range live {
			ps[i].Run.Key = r.Key
		}
		ps[20].Run.Key = gone.Key
		ps[150].Run.Key = ps[100].Run.Key // the same key twice in one call: the first item wins
		res := bulkCreate(t, s, ps)
		for i, p := range ps {
			r := res[i]
			holder, held := live[i]
			switch {
			case held:
				if !r.Deduped || r.Run.ID != holder.ID || r.Run.State != holder.State {
					t.Errorf("item %d over a live %s run: Deduped %v, run %s (%s); want %s", i, holder.State, r.Deduped, r.Run.ID, r.Run.State, holder.ID)
				}
			case i == 150:
				if !r.Deduped || r.Run.ID != ps[100].Run.ID {
					t.Errorf("the second item of one key: Deduped %v, run %s; want the first item's %s", r.Deduped, r.Run.ID, ps[100].Run.ID)
				}
			default:
				if r.Deduped || r.Run.ID != p.Run.ID {
					t.Errorf("item %d: Deduped %v, run %s; want a new run %s", i, r.Deduped, r.Run.ID, p.Run.ID)
				}
				continue
			}
			if _, err := s.RunGet(t.Context(), p.Run.ID); jobs.CodeOf(err) != jobs.CodeRunNotFound {
				t.Errorf("item %d was deduped but written: RunGet = %v", i, err)
			}
		}
		for _, r := range live {
			if n := len(events(t, s, r.ID)); n == 0 {
				t.Errorf("live run %s lost its history", r.ID)
			}
		}
	}},

	// Idempotency per tenant in a bulk create: a batch whose one (job, key) is named for two
	// tenants and no tenant creates three runs (a batch without a held key, which the Postgres
	// store streams with COPY), and a second batch naming it again for each, one tenant twice,
	// is deduped onto each tenant's own run (a batch meeting held keys).
	{"KeyIsHeldPerTenant", func(t *testing.T, s store.Store) {
		ps := bulkParams(1, bulkItems)
		tenants := []string{"a", "b", ""}
		for i, tenant := range tenants {
			ps[10+i] = tenantRun(11+i, "shared", tenant)
		}
		res := bulkCreate(t, s, ps)
		for i := range tenants {
			wantRuns(t, "first batch", res[10+i:11+i], []int{11 + i}, []bool{true}, tenants[i:i+1])
		}
		ps = bulkParams(1001, bulkItems)
		for i, tenant := range []string{"b", "", "a", "b"} {
			ps[20+i] = tenantRun(1021+i, "shared", tenant)
		}
		res = bulkCreate(t, s, ps)
		wantRuns(t, "second batch", res[20:24], []int{12, 13, 11, 12}, []bool{false, false, false, false},
			[]string{"b", "", "a", "b"})
		if res[19].Deduped || res[24].Deduped {
			t.Errorf("items beside the held key were deduped: %+v, %+v", res[19], res[24])
		}
	}},

	{"RefusedCallWritesNothing", func(t *testing.T, s store.Store) {
		taken := create(t, s, runParams(5000))[0].Run
		for name, spoil := range map[string]func(ps []store.CreateRunParams){
			"an id taken by another key": func(ps []store.CreateRunParams) { ps[150].Run.ID = taken.ID },
			"a state other than ready or delayed": func(ps []store.CreateRunParams) {
				ps[150].Run.State = store.StateRunning
			},
		} {
			t.Run(name, func(t *testing.T) {
				ps := bulkParams(1, bulkItems)
				spoil(ps)
				if _, err := s.RunCreateBulk(t.Context(), ps); err == nil {
					t.Fatal("RunCreateBulk accepted the batch")
				}
				for i, p := range ps {
					if p.Run.ID == taken.ID {
						continue
					}
					if _, err := s.RunGet(t.Context(), p.Run.ID); jobs.CodeOf(err) != jobs.CodeRunNotFound {
						t.Fatalf("item %d of a refused call exists: RunGet = %v", i, err)
					}
				}
				if r := get(t, s, taken.ID); r.Key != taken.Key || r.LastSeq != taken.LastSeq {
					t.Errorf("the run holding the id changed: %+v", r)
				}
			})
		}
	}},

	{"TenantListingFindsBulkRuns", func(t *testing.T, s store.Store) {
		// Every other item has no tenant (Postgres keeps those out of its tenant index); the
		// tenant's listing is its items, newest first, paged, and no untenanted one.
		ps := bulkParams(7000, bulkItems)
		var want []string
		for i := range ps {
			if i%2 == 0 {
				ps[i].Run.Tenant, ps[i].Run.NoTenant = "", true
			} else {
				ps[i].Run.Tenant = "bulk-tenant"
				want = append(want, ps[i].Run.ID)
			}
		}
		bulkCreate(t, s, ps)
		slices.Reverse(want)
		got := SearchIDs(t, s, store.RunQuery{ListParams: store.ListParams{Tenant: "bulk-tenant", Limit: 30}})
		if !slices.Equal(got, want) {
			t.Errorf("tenant listing: %d runs %v; want %d %v", len(got), got, len(want), want)
		}
	}},
}

// SearchIDs pages through q's search to its end, each page after the last one's final id, and
// returns the ids in the order the pages gave them.
func SearchIDs(t testing.TB, s store.Store, q store.RunQuery) []string {
	t.Helper()
	var got []string
	for {
		page, err := s.RunSearch(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			got = append(got, r.ID)
		}
		if len(page) < q.Limit {
			return got
		}
		q.Before = page[len(page)-1].ID
	}
}
