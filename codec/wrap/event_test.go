package wrap_test

import (
	"bytes"
	"context"
	"database/sql"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/codec/wrap"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/store/postgres"
	"github.com/ultimat3/jobs/store/sqlite"
	"github.com/ultimat3/jobs/worker"
)

type payment struct {
	OrderID string `json:"orderId"`
	Card    string `json:"card"`
}

// awaitPayment waits for the order's payment event, matched on its id, and returns the card.
var awaitPayment = jobs.MustDefine("await-payment", func(id string) string { return id }, jobs.NoTenant[string](),
	func(c *jobs.Ctx, id string) (string, error) {
		p, ok, err := jobs.WaitForEvent[payment](c, "paid", "order.paid", jobs.Match{"orderId": id}, 24*time.Hour)
		if err != nil || !ok {
			return "", err
		}
		return p.Card, nil
	}, jobs.Queue("pay"), jobs.Retry(jobs.RetryPolicy{Attempts: 1}))

// payFor publishes the order's payment from inside a run, matched on the order id.
var payFor = jobs.MustDefine("pay-for", func(id string) string { return id }, jobs.NoTenant[string](),
	func(c *jobs.Ctx, id string) (string, error) {
		return jobs.PublishMatch(c, "order.paid", payment{OrderID: id, Card: "4111-SECRET-" + id}, jobs.Match{"orderId": id})
	}, jobs.Queue("pay"), jobs.Retry(jobs.RetryPolicy{Attempts: 1}))

// rawBackend is a store and a way to read its published events' rows as stored (payload and
// fields, as text); memory has no rows, so rows is nil.
type rawBackend struct {
	name string
	open func(t *testing.T) (store.Store, func(t *testing.T) []string)
}

func rawBackends() []rawBackend {
	bs := []rawBackend{
		{"memory", func(*testing.T) (store.Store, func(*testing.T) []string) { return memory.New(), nil }},
		{"sqlite", func(t *testing.T) (store.Store, func(*testing.T) []string) {
			path := filepath.Join(t.TempDir(), "jobs.db")
			s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s, func(t *testing.T) []string {
				db, err := sql.Open("sqlite", path)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				rows, err := db.Query(`SELECT payload, fields FROM events`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var out []string
				for rows.Next() {
					var p []byte
					var f string
					if err := rows.Scan(&p, &f); err != nil {
						t.Fatal(err)
					}
					out = append(out, string(p)+"\x00"+f)
				}
				return out
			}
		}},
	}
	if testenv.Backends()[len(testenv.Backends())-1].Name == "postgres" {
		bs = append(bs, rawBackend{"postgres", func(t *testing.T) (store.Store, func(*testing.T) []string) {
			url, schema := testenv.FreshSchema(t)
			s, err := postgres.Open(context.Background(), postgres.Config{URL: url, Schema: schema, MaxConns: 8})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s, func(t *testing.T) []string {
				ctx := context.Background()
				conn, err := pgx.Connect(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				rows, err := conn.Query(ctx, `SELECT payload, fields::text FROM `+schema+`.events`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var out []string
				for rows.Next() {
					var p []byte
					var f string
					if err := rows.Scan(&p, &f); err != nil {
						t.Fatal(err)
					}
					out = append(out, string(p)+"\x00"+f)
				}
				return out
			}
		}})
	}
	return bs
}

// An event published through the codec's publisher, in process and over the HTTP API, and one a
// run publishes with jobs.PublishMatch on a worker with the codec, is stored encrypted: the engine matches the waiting run on the match field given beside it, the stored
// event row and the run's history hold no plaintext of the payload, the dump says what it is, and
// the run's worker opens it. A publisher without a codec still matches on the payload's fields.
func TestEventPayloadThroughCodec(t *testing.T) {
	t.Parallel()
	for _, b := range rawBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st, rows := b.open(t)
			env := testenv.Start(t, testenv.Options{Store: st})
			ctx := context.Background()
			set := aesSet(t, "k1", "k1")
			env.Worker(worker.Config{ID: "w", Frontend: wrap.Frontend(env.Engine, set)}, awaitPayment, payFor)
			srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)
			t.Cleanup(srv.Drain)
			client, err := api.NewClient(ts.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(client.Close)

			runs := map[string]string{}
			for _, id := range []string{"o-1", "o-2", "o-3", "o-4"} {
				res, err := awaitPayment.Enqueue(ctx, env.Engine, id)
				if err != nil {
					t.Fatal(err)
				}
				runs[id] = res.RunID
				env.Await(res.RunID, store.StateSuspended)
			}
			secret := func(id string) string { return "4111-SECRET-" + id }
			// o-1 in process, o-2 over HTTP: each through the codec, each delivered to its run only.
			for id, pub := range map[string]jobs.EventPublisher{"o-1": wrap.Publisher(env.Engine, set), "o-2": wrap.Publisher(client, set)} {
				res, err := jobs.PublishTo(ctx, pub, "order.paid", payment{OrderID: id, Card: secret(id)}, map[string]any{"orderId": id})
				if err != nil {
					t.Fatalf("publish %s: %v", id, err)
				}
				if res.Delivered != 1 {
					t.Errorf("publish %s delivered to %d runs, want 1", id, res.Delivered)
				}
			}
			// o-3 by a publisher without a codec: matched on the payload's own fields, as before.
			if res, err := env.Engine.Publish(ctx, "order.paid", payment{OrderID: "o-3", Card: "plain"}); err != nil || res.Delivered != 1 {
				t.Fatalf("plain publish: %+v, %v", res, err)
			}
			// o-4 from inside a run.
			pay, err := payFor.Enqueue(ctx, env.Engine, "o-4")
			if err != nil {
				t.Fatal(err)
			}
			env.Await(pay.RunID, store.StateCompleted)
			for id, runID := range runs {
				run := env.Await(runID, store.StateCompleted)
				plain, err := set.Open(run.Result)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := awaitPayment.Result(plain)
				want := secret(id)
				if id == "o-3" {
					want = "plain"
				}
				if got != want {
					t.Errorf("run %s returned %q, want %q", id, got, want)
				}
			}
			for _, id := range []string{"o-1", "o-2", "o-4"} {
				raw, err := env.Store.HistoryRead(ctx, runs[id], 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				received := false
				for _, e := range raw {
					if bytes.Contains(e.Data, []byte(secret(id))) || bytes.Contains(e.Data, []byte("SECRET")) {
						t.Errorf("run %s: event %d (%s) holds the payload in the clear", id, e.Seq, e.Kind)
					}
					if e.Kind == history.KindEventReceived {
						p, _ := e.Decode()
						if got := codecOf(p.(history.EventReceived).Payload); got != "aesgcm/k1" {
							t.Errorf("run %s: the received payload is under %q, want aesgcm/k1", id, got)
						}
						received = true
					}
				}
				if !received {
					t.Fatalf("run %s has no EventReceived", id)
				}
				var dump bytes.Buffer
				if err := history.Dump(&dump, raw); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(dump.String(), `"payload":"encrypted by codec aesgcm/k1, `) {
					t.Errorf("history dump does not say the payload is encrypted:\n%s", dump.String())
				}
			}
			if rows == nil {
				return
			}
			stored := rows(t)
			if len(stored) != 4 {
				t.Fatalf("%d event rows, want 4", len(stored))
			}
			fields := strings.Join(stored, "\n")
			if strings.Contains(fields, "SECRET") {
				t.Errorf("an event row holds the payload in the clear:\n%q", fields)
			}
			for _, id := range []string{"o-1", "o-2", "o-3", "o-4"} {
				if !strings.Contains(fields, `orderId=\"`+id+`\"`) && !strings.Contains(fields, `orderId="`+id+`"`) {
					t.Errorf("no row holds the match field of %s in the clear:\n%q", id, fields)
				}
			}
		})
	}
}

// A worker whose key is not the one the publisher encrypted with fails the run's attempt with
// X_ENCODING naming the codec, instead of running on a zero payload.
func TestEventPayloadWrongKey(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: testenv.OpenSQLite(t)})
	ctx := context.Background()
	right := aesSet(t, "k1", "k1")
	wrong := aesSet(t, "k1", "other", "k1") // the same key id, different key bytes
	env.Worker(worker.Config{ID: "w", Frontend: wrap.Frontend(env.Engine, wrong)}, awaitPayment)
	res, err := awaitPayment.Enqueue(ctx, env.Engine, "o-9")
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateSuspended)
	if _, err := jobs.PublishTo(ctx, wrap.Publisher(env.Engine, right), "order.paid", payment{OrderID: "o-9", Card: "c"}, map[string]any{"orderId": "o-9"}); err != nil {
		t.Fatal(err)
	}
	run := env.Await(res.RunID, store.StateFailed)
	if run.ErrorCode != string(jobs.CodeEncoding) || !strings.Contains(run.Error, "aesgcm/k1") {
		t.Errorf("failed with %s %q, want X_ENCODING naming aesgcm/k1", run.ErrorCode, run.Error)
	}
}

// What the engine refuses, changing nothing: an encoded payload without match fields (it could
// never match a wait), match fields that are not an object, too many of them, an unnamed one.
func TestEventMatchRefusals(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	ctx := context.Background()
	set := aesSet(t, "k1", "k1")
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	client, err := api.NewClient(ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	plain, _ := jobs.Encode(payment{OrderID: "o", Card: "c"})
	sealed, _ := set.Encode(plain)
	many := map[string]any{}
	for i := range 33 {
		many[string(rune('a'+i%26))+strings.Repeat("x", i)] = i
	}
	cases := map[string]error{}
	_, cases["codec publisher without match"] = wrap.Publisher(env.Engine, set).PublishMatched(ctx, jobs.PublishRequest{Event: "e", Payload: plain})
	_, cases["envelope without match, in process"] = env.Engine.PublishEvent(ctx, "e", sealed)
	_, cases["envelope without match, over HTTP"] = client.PublishEvent(ctx, "e", sealed)
	_, cases["too many match fields"] = client.PublishMatched(ctx, jobs.PublishRequest{Event: "e", Payload: sealed, Match: many})
	_, cases["unnamed match field"] = env.Engine.PublishMatched(ctx, jobs.PublishRequest{Event: "e", Payload: sealed, Match: map[string]any{"": 1}})
	_, cases["reserved name"] = env.Engine.PublishMatched(ctx, jobs.PublishRequest{Event: "jobs:child", Payload: sealed, Match: map[string]any{}})
	for name, err := range cases {
		if jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("%s: %v, want X_BAD_REQUEST", name, err)
		}
	}
	for _, q := range []string{"null", "[1]", "nope", `"x"`} {
		resp, err := ts.Client().Post(ts.URL+"/v1/events/e?match="+urlQuery(q), "application/json", strings.NewReader(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("match=%s: status %d, want 400", q, resp.StatusCode)
		}
	}
	// An empty match is allowed: the event has no fields, so only a wait with no match takes it.
	if _, err := client.PublishMatched(ctx, jobs.PublishRequest{Event: "e", Payload: sealed, Match: map[string]any{}}); err != nil {
		t.Fatalf("an empty match: %v", err)
	}
}

func urlQuery(s string) string {
	return (&url.URL{RawQuery: url.Values{"x": {s}}.Encode()}).RawQuery[2:]
}
