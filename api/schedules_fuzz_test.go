package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/scheduler"
	"github.com/ultimat3/jobs/store/memory"
)

// FuzzScheduleRoutes holds the schedule routes to "a hostile name or body is a 4xx with a code,
// never a 500 or a crash", with a scheduler running one valid and one refused declaration.
func FuzzScheduleRoutes(f *testing.F) {
	env := testenv.Start(f, testenv.Options{Store: memory.New()})
	ok := scheduler.Schedule{Name: "ok", Spec: "@hourly", TZ: "UTC", Job: "j", NoTenant: true}
	refused := scheduler.Schedule{Name: "refused", Spec: "@hourly", TZ: "Bogota", Job: "j", NoTenant: true}
	sc, err := scheduler.New(scheduler.Config{Engine: env.Engine, Schedules: scheduler.Static(ok, refused), Logger: env.Logger})
	if err != nil {
		f.Fatal(err)
	}
	s, err := NewServer(Config{Engine: env.Engine, Scheduler: sc, Logger: env.Logger})
	if err != nil {
		f.Fatal(err)
	}
	routes := []struct{ method, suffix string }{
		{http.MethodGet, ""}, {http.MethodPost, "/pause"}, {http.MethodPost, "/resume"},
		{http.MethodPost, "/trigger"}, {http.MethodDelete, ""}, {http.MethodPost, "/explode"},
	}
	for _, name := range []string{"ok", "refused", "nope", "", "a\x00b", "\xff\xfe", "..", "ok/pause", "%", "@manual@"} {
		for i := range routes {
			f.Add(uint8(i), name, []byte(`{}`))
		}
	}
	f.Add(uint8(1), "ok", []byte(`{"paused":`))
	f.Fuzz(func(t *testing.T, route uint8, name string, body []byte) {
		r := routes[int(route)%len(routes)]
		target := "http://127.0.0.1/v1/schedules/" + url.PathEscape(name) + r.suffix
		req := httptest.NewRequest(r.method, target, bytes.NewReader(body))
		req.Header.Set("Content-Type", ContentJSON)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s = %d %s", r.method, target, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var eb struct{ Error *jobs.Error }
			if json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error == nil || eb.Error.Code == "" {
				t.Fatalf("%s %s = %d with a body that is no JSON refusal: %q", r.method, target, rec.Code, rec.Body)
			}
		}
	})
}
