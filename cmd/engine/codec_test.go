package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/codec/aesgcm"
	"github.com/ultimat3/jobs/codec/wrap"
)

// The CLI holds no key: it shows an encrypted payload as what it is, never as bytes or an error.
func TestCLIShowsEncryptedPayloads(t *testing.T) {
	t.Parallel()
	o := setupOps(t)
	aes, err := aesgcm.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := jobs.Encode(map[string]string{"card": "4242-secret"})
	res, err := wrap.Enqueuer(o.env.Engine, codec.NewSet(aes)).Enqueue(context.Background(),
		jobs.EnqueueRequest{Job: "charge", Queue: "pay", Key: "o1", NoTenant: true, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"history", "dump", res.RunID}, {"history", "dump", res.RunID, "--format", "table"},
		{"jobs", "show", res.RunID}, {"jobs", "show", res.RunID, "--json"}} {
		r := o.run(t, args...)
		expect(t, r, 0, "")
		if !strings.Contains(r.stdout, "encrypted by codec aesgcm/k1") || strings.Contains(r.stdout, "4242-secret") {
			t.Errorf("%v:\n%s", args, r.stdout)
		}
	}
}
