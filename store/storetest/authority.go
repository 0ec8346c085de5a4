package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ultimat3/jobs/store"
)

var keyTests = []test{
	{"the first key stored wins and never changes", func(t *testing.T, s store.Store) {
		ctx := context.Background()
		k1, err := s.KeyEnsure(ctx, "lease", []byte("first"))
		if err != nil {
			t.Fatal(err)
		}
		k2, err := s.KeyEnsure(ctx, "lease", []byte("second"))
		if err != nil {
			t.Fatal(err)
		}
		if string(k1) != "first" || string(k2) != "first" {
			t.Fatalf("got %q then %q, want %q twice", k1, k2, "first")
		}
		other, err := s.KeyEnsure(ctx, "other", []byte("x"))
		if err != nil || string(other) != "x" {
			t.Fatalf("another name: got %q, %v", other, err)
		}
	}},
	{"concurrent ensurers all get one key", func(t *testing.T, s store.Store) {
		ctx := context.Background()
		const n = 8
		got := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = s.KeyEnsure(ctx, "lease", []byte(fmt.Sprintf("candidate-%d", i)))
			}()
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if !bytes.Equal(got[i], got[0]) {
				t.Fatalf("ensurer %d got %q, ensurer 0 got %q", i, got[i], got[0])
			}
		}
	}},
}
