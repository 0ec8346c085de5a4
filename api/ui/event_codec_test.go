package ui_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/codec/aesgcm"
	"github.com/ultimat3/jobs/codec/wrap"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// An event published through the codec shows in the receiving run's history as what it is: the
// console holds no key.
func TestEncryptedEventShowsAsSuch(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, testenv.Options{Store: memory.New()})
	aes, err := aesgcm.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{9}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	set := codec.NewSet(aes)
	def := jobs.MustDefine("await-card", func(id string) string { return id }, jobs.NoTenant[string](),
		func(c *jobs.Ctx, id string) (string, error) {
			_, _, err := jobs.WaitForEvent[map[string]string](c, "paid", "card.added", jobs.Match{"orderId": id}, time.Hour)
			return "ok", err
		})
	env.Worker(worker.Config{Frontend: wrap.Frontend(env.Engine, set)}, def)
	ctx := context.Background()
	res, err := def.Enqueue(ctx, env.Engine, "o1")
	if err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateSuspended)
	if _, err := jobs.PublishTo(ctx, wrap.Publisher(env.Engine, set), "card.added",
		map[string]string{"card": "4242-secret"}, map[string]any{"orderId": "o1"}); err != nil {
		t.Fatal(err)
	}
	env.Await(res.RunID, store.StateCompleted)
	b := newBrowser(t, serve(t, env, ""))
	st, body := b.get("/_x/runs/" + res.RunID)
	want(t, "run with an encrypted event", st, body, http.StatusOK, "EventReceived")
	i := strings.Index(body, "EventReceived")
	j := strings.Index(body[i:], "RunCompleted")
	if i < 0 || j < 0 || !strings.Contains(body[i:i+j], "&#34;payload&#34;: &#34;encrypted by codec aesgcm/k1") {
		t.Errorf("the EventReceived entry does not show its payload as encrypted:\n%s", body)
	}
	if strings.Contains(body, "4242-secret") {
		t.Error("the page shows the payload in the clear")
	}
}
