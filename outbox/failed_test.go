package outbox

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
)

type Blob struct {
	ID   string `json:"id"`
	Data string `json:"data"`
}

var blobJob = jobs.MustDefine("blob",
	func(in Blob) string { return "blob:" + in.ID }, jobs.NoTenant[Blob](),
	func(c *jobs.Ctx, in Blob) (int, error) { return len(in.Data), nil })

// ghostJob is declared by no worker until a test starts one that hosts it.
var ghostJob = jobs.MustDefine("ghost",
	func(in Note) string { return "ghost:" + in.ID }, jobs.NoTenant[Note](),
	func(c *jobs.Ctx, in Note) (string, error) { return "boo " + in.ID, nil })

// huge is an input over the engine's default MaxPayload (1 MiB).
func huge(id string) Blob { return Blob{ID: id, Data: strings.Repeat("x", 2<<20)} }

// stageWith stages one enqueue in its own transaction, commits it and returns the row id.
func stageWith(t *testing.T, b backend, enqueue func(tx Tx) (jobs.EnqueueResult, error)) string {
	t.Helper()
	tx, commit, _ := b.begin(t)
	res, err := enqueue(tx)
	if err != nil {
		t.Fatalf("stage: %v", err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	return res.Staged
}

func stageBlob(t *testing.T, b backend, ob *Outbox, in Blob) string {
	t.Helper()
	return stageWith(t, b, func(tx Tx) (jobs.EnqueueResult, error) { return blobJob.EnqueueTx(t.Context(), ob.Tx(tx), in) })
}

func failedRows(t *testing.T, s Store) ([]Row, int) {
	t.Helper()
	rows, total, err := s.Failed(t.Context(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return rows, total
}

func backlogOf(t *testing.T, s Store) int {
	t.Helper()
	n, _, err := s.Backlog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A row the engine refuses for good (an input over its MaxPayload) is set aside as failed, with
// its code, and the rows staged after it are published in the same pass; it is never tried again
// by itself. It is logged, counted, and out of the backlog.
func TestRefusedRowIsSetAside(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		stage(t, b, ob, "1")
		big := stageBlob(t, b, ob, huge("big"))
		stage(t, b, ob, "2", "3")

		var logs testenv.LogBuffer
		rec := &recorder{next: env.Engine}
		r, err := NewRelay(RelayConfig{Store: b.outbox, Publisher: rec, ID: "r1", Clock: env.Clock,
			Logger: logs.Logger(), Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		if n := pass(t, r); n != 3 {
			t.Fatalf("published %d rows, want the 3 around the refused one", n)
		}
		if got, want := rec.published(), keys("1", "2", "3"); !slices.Equal(got, want) {
			t.Errorf("published %v, want %v", got, want)
		}
		rows, total := failedRows(t, b.outbox)
		if total != 1 || len(rows) != 1 {
			t.Fatalf("failed rows %+v (total %d), want the refused one", rows, total)
		}
		f := rows[0]
		if f.ID != big || f.ErrorCode != jobs.CodePayloadTooLarge || !strings.Contains(f.ErrorMessage, "limit") ||
			f.Request.Job != "blob" || f.Request.Key != "blob:big" || f.ClaimedBy != "r1" {
			t.Errorf("failed row %s: job %q key %q code %s message %q claimed by %q; want %s, blob, X_PAYLOAD_TOO_LARGE",
				f.ID, f.Request.Job, f.Request.Key, f.ErrorCode, f.ErrorMessage, f.ClaimedBy, big)
		}
		if d := f.FailedAt.Sub(env.Clock.Now()); f.FailedAt.IsZero() || d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("failed at %s, want the relay's now %s", f.FailedAt, env.Clock.Now())
		}
		if n := backlogOf(t, b.outbox); n != 0 {
			t.Errorf("backlog %d, want 0: a failed row is out of line", n)
		}
		line := ""
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "jobs.outbox.row-failed") {
				line = l
			}
		}
		for _, want := range []string{"level=ERROR", "row=" + big, "job=blob", "code=X_PAYLOAD_TOO_LARGE", "relay=r1"} {
			if !strings.Contains(line, want) {
				t.Errorf("log line %q lacks %q:\n%s", line, want, logs.String())
			}
		}
		if rows, _ := r.Backlog(); rows != 0 || r.FailedRows() != 1 || testutil.ToFloat64(r.metrics.failedTotal) != 1 {
			t.Errorf("metrics: backlog %v, failed %v, failed_total %v; want 0, 1, 1", rows, r.FailedRows(),
				testutil.ToFloat64(r.metrics.failedTotal))
		}

		// Later passes leave it alone, and later rows still go out.
		stage(t, b, ob, "4")
		if n := pass(t, r); n != 1 {
			t.Fatalf("the next pass published %d rows, want 1", n)
		}
		if n := pass(t, r); n != 0 {
			t.Fatalf("an empty pass published %d rows", n)
		}
		if n := rec.tried("blob:big"); n != 1 {
			t.Errorf("the refused row was tried %d times, want once", n)
		}
		if _, total := failedRows(t, b.outbox); total != 1 {
			t.Errorf("%d failed rows, want still 1: nothing is deleted", total)
		}
		if runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "blob"}); err != nil || len(runs) != 0 {
			t.Errorf("%d runs of the refused job (%v), want none", len(runs), err)
		}
		if len(runsOf(t, env)) != 4 {
			t.Errorf("note runs %v, want 4", runsOf(t, env))
		}
	})
}

// A job no worker declares yet (a producer deployed before its workers) is the fleet's state, not
// the row's fault: X_JOB_UNDECLARED stops the pass and keeps the order, as a transient failure
// does, and once a worker declares the job the row goes out in its place.
func TestUndeclaredRowHoldsItsPlaceUntilDeclared(t *testing.T) {
	eachBackendWith(t, testenv.Options{RequireDeclared: true}, func(t *testing.T, b backend, env *testenv.Env) {
		env.Worker(workerConfig(), noteJob)
		ob := newOutbox(t, b, env, Required)
		stage(t, b, ob, "1")
		stageWith(t, b, func(tx Tx) (jobs.EnqueueResult, error) {
			return ghostJob.EnqueueTx(t.Context(), ob.Tx(tx), Note{ID: "g"})
		})
		stage(t, b, ob, "2")
		rec := &recorder{next: env.Engine}
		r := newRelay(t, b, env, rec, "r1", 10)
		if n, err := r.Pass(t.Context()); n != 1 || !jobs.HasCode(err, jobs.CodeJobUndeclared) {
			t.Fatalf("pass: published %d, %v; want 1 and a stop at the undeclared job", n, err)
		}
		if _, total := failedRows(t, b.outbox); total != 0 {
			t.Fatalf("%d failed rows, want none: an undeclared job holds its place", total)
		}
		env.Worker(workerConfig(), ghostJob)
		if n := pass(t, r); n != 2 {
			t.Fatalf("after the job was declared the relay published %d rows, want 2", n)
		}
		if got, want := rec.published(), []string{"note:1", "ghost:g", "note:2"}; !slices.Equal(got, want) {
			t.Errorf("published %v, want %v", got, want)
		}
	})
}

// refuseJob refuses the rows of one job with a terminal code while on, as an engine whose workers
// declare the job with a keyed limit the row's input cannot key refuses them (X_FLOW_KEY), and
// hands every other row to next.
type refuseJob struct {
	next jobs.Enqueuer
	job  string
	on   atomic.Bool
}

func (p *refuseJob) Enqueue(ctx context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	if req.Job == p.job && p.on.Load() {
		return jobs.EnqueueResult{}, jobs.Errorf(jobs.CodeFlowKey, "enqueue of %q: the input has no value for the limit's key", req.Job)
	}
	return p.next.Enqueue(ctx, req)
}

// A row refused for good is set aside, the rows behind it go on, and once its cause is fixed the
// operator requeues the row and the relay publishes it in its place.
func TestRefusedRowIsRequeuedOnceFixed(t *testing.T) {
	eachBackendWith(t, testenv.Options{RequireDeclared: true}, func(t *testing.T, b backend, env *testenv.Env) {
		env.Worker(workerConfig(), noteJob, ghostJob)
		ob := newOutbox(t, b, env, Required)
		stage(t, b, ob, "1")
		ghost := stageWith(t, b, func(tx Tx) (jobs.EnqueueResult, error) {
			return ghostJob.EnqueueTx(t.Context(), ob.Tx(tx), Note{ID: "g"})
		})
		stage(t, b, ob, "2")
		rec := &recorder{next: env.Engine}
		ref := &refuseJob{next: rec, job: "ghost"}
		ref.on.Store(true)
		r := newRelay(t, b, env, ref, "r1", 10)
		if n := pass(t, r); n != 2 {
			t.Fatalf("published %d rows, want the 2 around the refused one", n)
		}
		if got, want := rec.published(), keys("1", "2"); !slices.Equal(got, want) {
			t.Errorf("published %v, want %v", got, want)
		}
		rows, total := failedRows(t, b.outbox)
		if total != 1 || len(rows) != 1 || rows[0].ID != ghost || rows[0].ErrorCode != jobs.CodeFlowKey {
			t.Fatalf("failed rows %+v (total %d), want %s with X_FLOW_KEY", rows, total, ghost)
		}

		// Requeue and Drop pass over ids that name no failed row.
		stage(t, b, ob, "3") // in line
		pending, err := b.outbox.Claim(t.Context(), "peek", env.Clock.Now(), DefaultLease, 10)
		if err != nil || len(pending) != 1 {
			t.Fatalf("claim: %d rows, %v", len(pending), err)
		}
		if _, err := b.outbox.Release(t.Context(), "peek", rowIDs(pending)); err != nil {
			t.Fatal(err)
		}
		for _, ids := range [][]string{{pending[0].ID}, {"no-such-row"}, nil} {
			if n, err := b.outbox.Requeue(t.Context(), ids); err != nil || n != 0 {
				t.Errorf("requeue %v: %d, %v; want 0", ids, n, err)
			}
			if n, err := b.outbox.Drop(t.Context(), ids); err != nil || n != 0 {
				t.Errorf("drop %v: %d, %v; want 0", ids, n, err)
			}
		}
		if n := backlogOf(t, b.outbox); n != 1 {
			t.Errorf("backlog %d, want the 1 row in line", n)
		}

		// The fix (the job's limit no longer keys on a field its inputs lack). Then the requeued
		// row goes out first, in its place, ahead of the row staged after it.
		ref.on.Store(false)
		if n, err := b.outbox.Requeue(t.Context(), []string{ghost}); err != nil || n != 1 {
			t.Fatalf("requeue: %d, %v; want 1", n, err)
		}
		if n, err := b.outbox.Requeue(t.Context(), []string{ghost}); err != nil || n != 0 {
			t.Errorf("a second requeue: %d, %v; want 0", n, err)
		}
		if _, total := failedRows(t, b.outbox); total != 0 {
			t.Errorf("%d failed rows after the requeue, want 0", total)
		}
		if n := backlogOf(t, b.outbox); n != 2 {
			t.Errorf("backlog %d after the requeue, want 2", n)
		}
		if n := pass(t, r); n != 2 {
			t.Fatalf("after the requeue the relay published %d rows, want 2", n)
		}
		if got, want := rec.published(), []string{"note:1", "note:2", "ghost:g", "note:3"}; !slices.Equal(got, want) {
			t.Errorf("published %v, want %v", got, want)
		}
		if runs, err := env.Engine.ListRuns(t.Context(), store.ListParams{Job: "ghost"}); err != nil || len(runs) != 1 {
			t.Errorf("%d runs of the requeued job (%v), want 1", len(runs), err)
		}
	})
}

// A failed row can be dropped: it is deleted, and its job is never enqueued.
func TestDropFailedRow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		big := stageBlob(t, b, ob, huge("big"))
		r := newRelay(t, b, env, env.Engine, "r1", 10)
		if n := pass(t, r); n != 0 {
			t.Fatalf("published %d rows, want 0", n)
		}
		if n, err := b.outbox.Drop(t.Context(), []string{big}); err != nil || n != 1 {
			t.Fatalf("drop: %d, %v; want 1", n, err)
		}
		if _, total := failedRows(t, b.outbox); total != 0 {
			t.Errorf("%d failed rows after the drop", total)
		}
		if n, err := b.outbox.Requeue(t.Context(), []string{big}); err != nil || n != 0 {
			t.Errorf("requeue of a dropped row: %d, %v; want 0", n, err)
		}
		if b.exec != nil {
			if n := b.published(t); n != 0 {
				t.Errorf("%d rows published", n)
			}
		}
		if n := pass(t, r); n != 0 || backlogOf(t, b.outbox) != 0 {
			t.Errorf("after the drop: published %d, backlog %d", n, backlogOf(t, b.outbox))
		}
	})
}

// A transient failure still stops the pass where it happened and keeps the order, also in a
// batch that sets a row aside.
func TestTransientFailureStillStopsThePass(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		ob := newOutbox(t, b, env, Required)
		stage(t, b, ob, "1")
		big := stageBlob(t, b, ob, huge("big"))
		stage(t, b, ob, "2", "3")
		rec := &recorder{next: env.Engine, fail: map[string]int{"note:2": 1}}
		r := newRelay(t, b, env, rec, "r1", 10)
		n, err := r.Pass(t.Context())
		if n != 1 || jobs.CodeOf(err) != jobs.CodeStoreUnavailable {
			t.Fatalf("pass: %d, %v; want 1 published, then X_STORE_UNAVAILABLE", n, err)
		}
		if got, want := rec.published(), keys("1"); !slices.Equal(got, want) {
			t.Fatalf("published %v, want %v: nothing may overtake the failed publish", got, want)
		}
		if rows, total := failedRows(t, b.outbox); total != 1 || rows[0].ID != big {
			t.Errorf("failed rows %+v, want only %s", rows, big)
		}
		if n := backlogOf(t, b.outbox); n != 2 {
			t.Errorf("backlog %d, want the 2 rows from the failed publish on", n)
		}
		// Released at once: the next pass carries on from the failed row.
		if n := pass(t, r); n != 2 {
			t.Fatalf("the next pass published %d rows, want 2", n)
		}
		if got, want := rec.published(), keys("1", "2", "3"); !slices.Equal(got, want) {
			t.Errorf("published %v, want %v", got, want)
		}
		if n := rec.tried("blob:big"); n != 1 {
			t.Errorf("the refused row was tried %d times, want once", n)
		}
	})
}

// refuser is a Publisher that refuses the key "note:bad" with err and accepts every other.
type refuser struct {
	err  error
	keys []string
}

func (p *refuser) Enqueue(_ context.Context, req jobs.EnqueueRequest) (jobs.EnqueueResult, error) {
	if req.Key == "note:bad" {
		return jobs.EnqueueResult{}, p.err
	}
	p.keys = append(p.keys, req.Key)
	return jobs.EnqueueResult{RunID: "run-" + req.Key}, nil
}

// Which refusals set a row aside: terminal codes about the request do; transient ones, codes
// without a class, and the terminal codes that name the relay's own wiring stop the pass.
func TestWhichRefusalsSetARowAside(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err   error
		aside bool
	}{
		{jobs.Errorf(jobs.CodePayloadTooLarge, "too big"), true},
		{jobs.Errorf(jobs.CodeFlowKey, "no flow key"), true},
		{jobs.Errorf(jobs.CodeJobUndeclared, "undeclared"), false},
		{jobs.Errorf(jobs.CodeQueueUndeclared, "undeclared queue"), false},
		{jobs.Errorf(jobs.CodeBadRequest, "bad"), true},
		{jobs.Errorf(jobs.CodeEncoding, "undecodable"), true},
		{jobs.Errorf(jobs.CodeActorInvalid, "actor"), true},
		{jobs.Errorf(jobs.CodeStoreUnavailable, "down"), false},
		{jobs.Errorf(jobs.CodeEngineUnreachable, "unreachable"), false},
		{jobs.Errorf(jobs.CodeDraining, "draining"), false},
		{jobs.Errorf(jobs.CodeCommitUnknown, "unknown"), false},
		{jobs.Errorf(jobs.CodeInternal, "internal"), false},
		{jobs.Errorf(jobs.CodeRateLimited, "later"), false},
		{jobs.Errorf(jobs.CodeOverloaded, "later"), false},
		{jobs.Errorf(jobs.CodeUnauthorized, "no token"), false},
		{jobs.Errorf(jobs.CodeForbidden, "viewer"), false},
		{jobs.Errorf(jobs.CodeRouteNotFound, "wrong base URL"), false},
		{jobs.Errorf(jobs.CodeMethodNotAllowed, "wrong base URL"), false},
		{jobs.Errorf(jobs.CodeDriverUnavailable, "no database"), false},
		{jobs.Errorf(jobs.CodeInvariant, "a bug"), false},
		{jobs.Errorf("X_APP_UNKNOWN", "unclassified"), false},
		{errors.New("no code"), false},
		{context.Canceled, false},
	} {
		name := string(jobs.CodeOf(c.err))
		if name == "" {
			name = c.err.Error()
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mem := NewMemoryStore()
			ob, err := New(Config{Store: mem, Mode: Required})
			if err != nil {
				t.Fatal(err)
			}
			stageBadThenOK(t, mem, ob)
			pub := &refuser{err: c.err}
			r, err := NewRelay(RelayConfig{Store: mem, Publisher: pub, Clock: clock.Real{}, Logger: testenv.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			n, err := r.Pass(t.Context())
			_, total := failedRows(t, mem)
			if c.aside {
				if n != 1 || err != nil || total != 1 || backlogOf(t, mem) != 0 {
					t.Errorf("published %d (%v), %d failed, backlog %d; want the row set aside and the next published",
						n, err, total, backlogOf(t, mem))
				}
				return
			}
			if n != 0 || err == nil || jobs.CodeOf(err) != jobs.CodeOf(c.err) || total != 0 || backlogOf(t, mem) != 2 || len(pub.keys) != 0 {
				t.Errorf("published %v (%v), %d failed, backlog %d; want the pass stopped at the row with its code, both rows in line",
					pub.keys, err, total, backlogOf(t, mem))
			}
		})
	}
}

// A relay whose api.Client points at a server that is not the engine (a web server's 404 or 405
// page, an empty answer, a 2xx page such as a login page a proxy redirects to) holds every row in
// line, as the wiring codes promise: set aside, the rows would all be refused alike, and one
// wrong address would empty the outbox into the failed list.
func TestRelayAtAWrongAddressHoldsItsRows(t *testing.T) {
	t.Parallel()
	page := "<html><body>not the engine</body></html>"
	for _, c := range []struct {
		name        string
		status      int
		contentType string
		body        string
	}{
		{"404 page", http.StatusNotFound, "text/html", page},
		{"404 empty", http.StatusNotFound, "", ""},
		{"405 page", http.StatusMethodNotAllowed, "text/html", page},
		{"200 page", http.StatusOK, "text/html", page},
		{"200 empty", http.StatusOK, "", ""},
		{"204", http.StatusNoContent, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.contentType != "" {
					w.Header().Set("Content-Type", c.contentType)
				}
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			cl, err := api.NewClient(srv.URL, "", api.WithNetHTTP(), api.WithoutFrames())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			mem := NewMemoryStore()
			ob, err := New(Config{Store: mem, Mode: Required})
			if err != nil {
				t.Fatal(err)
			}
			tx := mem.Begin()
			for _, id := range []string{"1", "2", "3"} {
				if _, err := noteJob.EnqueueTx(t.Context(), ob.Tx(tx), Note{ID: id}); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r, err := NewRelay(RelayConfig{Store: mem, Publisher: cl, Clock: clock.Real{}, Logger: testenv.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			n, err := r.Pass(t.Context())
			if rows, total := failedRows(t, mem); total != 0 {
				t.Fatalf("the relay set %d rows aside (%s: %s); want them held in line", total, rows[0].ErrorCode, rows[0].ErrorMessage)
			}
			if n != 0 || err == nil || setsAside(err) || backlogOf(t, mem) != 3 {
				t.Errorf("pass: published %d, %v, backlog %d; want the pass stopped on a held code, the 3 rows in line",
					n, err, backlogOf(t, mem))
			}
		})
	}
}

// lapsedStore's MarkFailed finds the row held by another relay, as after a lease takeover.
type lapsedStore struct{ Store }

func (lapsedStore) MarkFailed(context.Context, string, string, jobs.Code, string, time.Time) (bool, error) {
	return false, nil
}

// A relay that can no longer set a refused row aside (its claim lapsed) stops there, as after a
// transient failure: the rows behind it are not published over it.
func TestRefusedRowWhoseClaimLapsed(t *testing.T) {
	t.Parallel()
	mem := NewMemoryStore()
	ob, err := New(Config{Store: mem, Mode: Required})
	if err != nil {
		t.Fatal(err)
	}
	stageBadThenOK(t, mem, ob)
	pub := &refuser{err: jobs.Errorf(jobs.CodeFlowKey, "no flow key")}
	r, err := NewRelay(RelayConfig{Store: lapsedStore{mem}, Publisher: pub, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.Pass(t.Context())
	if n != 0 || jobs.CodeOf(err) != jobs.CodeFlowKey || len(pub.keys) != 0 {
		t.Errorf("pass: published %v (%d), %v; want a stop at the refused row", pub.keys, n, err)
	}
	if n := backlogOf(t, mem); n != 2 {
		t.Errorf("backlog %d, want 2", n)
	}
}

// A row the SQL store cannot decode is set aside with X_ENCODING, by its job, instead of failing
// every claim.
func TestUndecodableRowIsSetAside(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		if b.exec == nil {
			t.Skip("the memory store keeps requests decoded")
		}
		ob := newOutbox(t, b, env, Required)
		ids := stage(t, b, ob, "1", "bad", "2")
		garbage := "X'C1'" // 0xc1 is never valid msgpack
		if b.name == "postgres" {
			garbage = "'\\xc1'::bytea"
		}
		b.exec(t, "UPDATE "+b.table+" SET request = "+garbage+" WHERE id = '"+ids[1]+"'")
		rec := &recorder{next: env.Engine}
		if n := pass(t, newRelay(t, b, env, rec, "r1", 10)); n != 2 {
			t.Fatalf("published %d rows, want 2", n)
		}
		if got, want := rec.published(), keys("1", "2"); !slices.Equal(got, want) {
			t.Errorf("published %v, want %v", got, want)
		}
		rows, total := failedRows(t, b.outbox)
		if total != 1 || rows[0].ID != ids[1] || rows[0].ErrorCode != jobs.CodeEncoding || rows[0].Request.Job != "note" {
			t.Errorf("failed rows %+v, want %s with X_ENCODING, job note", rows, ids[1])
		}
	})
}

// oldDDL is the outbox table as the first release created it, before failed rows.
var oldDDL = map[string]string{
	"sqlite": `CREATE TABLE {T} (
	id           TEXT    NOT NULL PRIMARY KEY,
	job          TEXT    NOT NULL,
	request      BLOB    NOT NULL,
	staged_at    INTEGER NOT NULL,
	claimed_by   TEXT,
	claimed_at   INTEGER,
	published_at INTEGER
)`,
	"postgres": `CREATE TABLE {T} (
	id           text PRIMARY KEY,
	job          text NOT NULL,
	request      bytea NOT NULL,
	staged_at    timestamptz NOT NULL,
	claimed_by   text,
	claimed_at   timestamptz,
	published_at timestamptz
)`,
}

// A table an earlier version created keeps working: Migrate (run twice) adds the failed-row
// columns, and the rows staged before the upgrade are published. On Postgres, re-applying
// PostgresDDL does the same for an application's own migrations.
func TestMigrateUpgradesAnOldTable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, env *testenv.Env) {
		if b.exec == nil {
			t.Skip("the memory store has no schema")
		}
		for _, how := range []string{"Migrate", "DDL"} {
			if how == "DDL" && b.name != "postgres" {
				continue
			}
			table := b.qualify("old_outbox_" + strings.ToLower(how))
			b.exec(t, strings.ReplaceAll(oldDDL[b.name], "{T}", table))
			s := b.sqlStore(t, table)
			ob, err := New(Config{Store: s, Mode: Required, Clock: env.Clock})
			if err != nil {
				t.Fatal(err)
			}
			old := backend{name: b.name, outbox: s, begin: b.begin}
			stage(t, old, ob, how+"-before")
			if how == "Migrate" {
				for range 2 {
					if err := s.Migrate(t.Context()); err != nil {
						t.Fatalf("migrate: %v", err)
					}
				}
			} else {
				b.exec(t, PostgresDDL(table))
				b.exec(t, PostgresDDL(table))
			}
			stageBlob(t, old, ob, huge(how))
			stage(t, old, ob, how+"-after")
			rec := &recorder{next: env.Engine}
			if n := pass(t, newRelay(t, old, env, rec, "r-"+strings.ToLower(how), 10)); n != 2 {
				t.Fatalf("%s: published %d rows, want 2", how, n)
			}
			if got, want := rec.published(), keys(how+"-before", how+"-after"); !slices.Equal(got, want) {
				t.Errorf("%s: published %v, want %v", how, got, want)
			}
			if rows, total := failedRows(t, s); total != 1 || rows[0].ErrorCode != jobs.CodePayloadTooLarge {
				t.Errorf("%s: failed rows %+v", how, rows)
			}
		}
	})
}

// An outbox configured with a MaxPayload refuses a larger input at staging, in the caller's
// transaction, where the caller can still be told.
func TestStageRefusesOverMaxPayload(t *testing.T) {
	t.Parallel()
	mem := NewMemoryStore()
	ob, err := New(Config{Store: mem, Mode: Required, MaxPayload: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	tx := mem.Begin()
	_, err = blobJob.EnqueueTx(t.Context(), ob.Tx(tx), Blob{ID: "big", Data: strings.Repeat("x", 2<<10)})
	wantCode(t, "an input over the outbox's MaxPayload", err, jobs.CodePayloadTooLarge)
	if _, err := blobJob.EnqueueTx(t.Context(), ob.Tx(tx), Blob{ID: "small", Data: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := backlogOf(t, mem); n != 1 {
		t.Errorf("backlog %d, want only the small row", n)
	}
	_, err = New(Config{Store: mem, MaxPayload: -1})
	wantCode(t, "a negative MaxPayload", err, jobs.CodeInvariant)
}

// stageBadThenOK stages the rows note:bad (which refuser refuses) and note:ok in one transaction.
func stageBadThenOK(t *testing.T, mem *MemoryStore, ob *Outbox) {
	t.Helper()
	tx := mem.Begin()
	for _, id := range []string{"bad", "ok"} {
		if _, err := noteJob.EnqueueTx(t.Context(), ob.Tx(tx), Note{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
