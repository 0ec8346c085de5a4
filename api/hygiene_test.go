package api_test

import (
	"context"
	"math"
	"net/http"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/store"
)

// TestNumbersAndTextRefusedAlikeOnJSONAndMsgpack: a number no store can render back (1e400, NaN,
// an integer past uint64) and text that is not UTF-8 are refused at enqueue and publish,
// whichever encoding carries them, and nothing is created.
func TestNumbersAndTextRefusedAlikeOnJSONAndMsgpack(t *testing.T) {
	t.Parallel()
	b := setup(t, api.Config{})
	ctx := context.Background()
	post := func(path, ct string, body []byte) (int, jobs.Code) {
		st, _, out := b.call(t, http.MethodPost, path, ct, "", body)
		if ct == api.ContentJSON {
			if st < 300 {
				return st, ""
			}
			return st, jsonCode(t, out)
		}
		var e jobs.Error
		if st >= 300 {
			if err := msgpack.Unmarshal(out, &e); err != nil {
				t.Fatalf("not a msgpack refusal: %q", out)
			}
		}
		return st, e.Code
	}
	jsonBodies := map[string]string{
		"1e400":                `{"job":"j","key":"k","noTenant":true,"input":{"x":1e400}}`,
		"-1e400":               `{"job":"j","key":"k","noTenant":true,"input":[-1e400]}`,
		"an integer past u64":  `{"job":"j","key":"k","noTenant":true,"input":123456789012345678901234567890}`,
		"invalid UTF-8 in key": "{\"job\":\"j\",\"key\":\"k\xff\",\"noTenant\":true}",
		"invalid UTF-8 input":  "{\"job\":\"j\",\"key\":\"k\",\"noTenant\":true,\"input\":\"\xc3\"}",
		"a lone surrogate":     `{"job":"j","key":"k\ud800","noTenant":true}`,
		"a reversed pair":      `{"job":"j","key":"k","noTenant":true,"input":"\udc00\ud800"}`,
	}
	for what, body := range jsonBodies {
		if st, code := post("/v1/runs", api.ContentJSON, []byte(body)); st != http.StatusBadRequest || code != jobs.CodeBadRequest {
			t.Errorf("JSON enqueue with %s: %d %s, want 400 X_BAD_REQUEST", what, st, code)
		}
	}
	nan, _ := msgpack.Marshal(math.NaN())
	inf, _ := msgpack.Marshal(map[string]any{"x": math.Inf(-1)})
	badStr := []byte{0x81, 0xa1, 'x', 0xa1, 0xff}
	for what, input := range map[string][]byte{"NaN": nan, "-Inf": inf, "invalid UTF-8": badStr} {
		body, _ := msgpack.Marshal(jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true, Input: input})
		if st, code := post("/v1/runs", api.ContentMsgpack, body); st != http.StatusBadRequest || code != jobs.CodeBadRequest {
			t.Errorf("msgpack enqueue with %s: %d %s, want 400 X_BAD_REQUEST", what, st, code)
		}
		if st, code := post("/v1/events/e", api.ContentMsgpack, input); st != http.StatusBadRequest || code != jobs.CodeBadRequest {
			t.Errorf("msgpack publish with %s: %d %s, want 400 X_BAD_REQUEST", what, st, code)
		}
		// In-process, the engine refuses the same.
		if _, err := b.env.Engine.Enqueue(ctx, jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true, Input: input}); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("in-process enqueue with %s: %v", what, err)
		}
	}
	for what, body := range map[string]string{"1e400": `{"x":1e400}`, "invalid UTF-8": "\"\xff\"", "a lone surrogate": `"\udfff"`} {
		if st, code := post("/v1/events/e", api.ContentJSON, []byte(body)); st != http.StatusBadRequest || code != jobs.CodeBadRequest {
			t.Errorf("JSON publish with %s: %d %s, want 400 X_BAD_REQUEST", what, st, code)
		}
	}
	runs, err := b.env.Engine.ListRuns(ctx, store.ListParams{})
	if err != nil || len(runs) != 0 {
		t.Fatalf("refused enqueues created %d runs (%v)", len(runs), err)
	}
	// What is valid still goes through, escapes and all.
	if st, code := post("/v1/runs", api.ContentJSON, []byte(`{"job":"j","key":"k\u00e9\ud83d\ude00","noTenant":true,"input":{"x":1e300,"n":18446744073709551615}}`)); st != http.StatusCreated {
		t.Fatalf("a valid enqueue: %d %s", st, code)
	}
}
