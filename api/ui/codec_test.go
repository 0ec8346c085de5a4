package ui_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/codec/aesgcm"
	"github.com/ultimat3/jobs/codec/wrap"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// The console holds no key: a run's encrypted input shows as what it is, in the header and in
// the history.
func TestEncryptedPayloadsShowAsSuch(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	aes, err := aesgcm.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{9}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := jobs.Encode(map[string]string{"card": "4242-secret"})
	res, err := wrap.Enqueuer(env.Engine, codec.NewSet(aes)).Enqueue(context.Background(),
		jobs.EnqueueRequest{Job: "charge", Queue: "pay", Key: "o1", NoTenant: true, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, serve(t, env, ""))
	st, body := b.get("/_x/runs/" + res.RunID)
	want(t, "encrypted run", st, body, http.StatusOK, "encrypted by codec aesgcm/k1")
	if n := strings.Count(body, "encrypted by codec aesgcm/k1"); n < 2 || strings.Contains(body, "4242-secret") {
		t.Errorf("the page shows the marker %d times (want the input and the history's RunStarted)", n)
	}
}
