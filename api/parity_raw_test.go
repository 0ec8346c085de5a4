package api_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/scheduler"
)

// The server refuses by itself what client.Local refuses, for a caller that does not use our
// client and so is not refused before it sends: a run id or schedule name over 1,000 bytes, a
// filter over 1,000 bytes, a negative overview window or bucket, each X_BAD_REQUEST. A lone
// escaped slash ("%2F", the run or schedule "/", which both clients refuse before sending and no
// run or schedule can have) is routed nowhere by net/http's router: X_ROUTE_NOT_FOUND, a 404 as
// a missing run's, for any credential.
func TestTheServerRefusesWhatLocalRefuses(t *testing.T) {
	t.Parallel()
	const admin, acme = "raw-admin", "raw-acme"
	b := setup(t, api.Config{Token: admin, Credentials: []api.Credential{{Token: acme, Role: api.RoleOperator, Tenant: "acme"}}})
	sc, err := scheduler.New(scheduler.Config{Engine: b.env.Engine, Logger: b.env.Logger, Schedules: scheduler.Static()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop(context.Background()) })
	srv, err := api.NewServer(api.Config{Engine: b.env.Engine, Scheduler: sc, Logger: b.env.Logger, Token: admin,
		Credentials: []api.Credential{{Token: acme, Role: api.RoleOperator, Tenant: "acme"}}, NoUI: true})
	if err != nil {
		t.Fatal(err)
	}
	b = serveBundle(t, b.env, srv, admin)

	long := url.PathEscape(strings.Repeat("r", jobs.MaxIdentifier+1))
	for _, tc := range []struct {
		method, path, token string
		code                jobs.Code
	}{
		{"GET", "/v1/overview?window=-1h", admin, jobs.CodeBadRequest},
		{"GET", "/v1/overview?bucket=-1m", admin, jobs.CodeBadRequest},
		{"GET", "/v1/overview?window=-9223372036854775808ns", admin, jobs.CodeBadRequest},
		{"GET", "/v1/runs/" + long, admin, jobs.CodeBadRequest},
		{"GET", "/v1/runs/" + long + "/history", admin, jobs.CodeBadRequest},
		{"GET", "/v1/runs/" + long + "/result", admin, jobs.CodeBadRequest},
		{"POST", "/v1/runs/" + long + "/cancel", admin, jobs.CodeBadRequest},
		{"POST", "/v1/runs/" + long + "/retry", admin, jobs.CodeBadRequest},
		{"GET", "/v1/schedules/" + long, admin, jobs.CodeBadRequest},
		{"POST", "/v1/schedules/" + long + "/pause", admin, jobs.CodeBadRequest},
		{"POST", "/v1/schedules/" + long + "/trigger", admin, jobs.CodeBadRequest},
		{"GET", "/v1/runs?tenant=" + long, admin, jobs.CodeBadRequest},
		{"GET", "/v1/dead-letters?queue=" + long, admin, jobs.CodeBadRequest},
		{"GET", "/v1/manifest?kind=" + long, admin, jobs.CodeBadRequest},
		{"GET", "/v1/backfills?tenant=" + long, admin, jobs.CodeBadRequest},
		{"GET", "/v1/runs/%2F", admin, jobs.CodeRouteNotFound},
		{"GET", "/v1/runs/%2f/history", admin, jobs.CodeRouteNotFound},
		{"POST", "/v1/runs/%2F/cancel", admin, jobs.CodeRouteNotFound},
		{"GET", "/v1/runs/%2F", acme, jobs.CodeRouteNotFound},
		{"POST", "/v1/runs/%2F/retry", acme, jobs.CodeRouteNotFound},
		{"GET", "/v1/schedules/%2F", admin, jobs.CodeRouteNotFound},
		{"POST", "/v1/schedules/%2F/resume", admin, jobs.CodeRouteNotFound},
		{"GET", "/v1/runs/%2F/nothing", admin, jobs.CodeRouteNotFound},
	} {
		var body []byte
		ct := ""
		if tc.method == "POST" {
			body, ct = []byte("{}"), api.ContentJSON
		}
		status, _, out := b.call(t, tc.method, tc.path, ct, tc.token, body)
		if got := jsonCode(t, out); got != tc.code || status/100 != 4 {
			t.Errorf("%s %.80s: %d %s, want a 4xx %s", tc.method, tc.path, status, got, tc.code)
		}
	}
}
