package codec_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/ultimat3/jobs/codec"
)

// Gzip never writes a payload its own bound would refuse to inflate: 64 MiB of zeros deflate to
// a few KiB, well under the engine's payload limit, so the record landed and every later read
// of it (the run's replay, its result) failed for ever. The encode is refused instead, where the
// caller still holds the value; a payload at the bound still round-trips.
func TestGzipRefusesToWriteWhatItCouldNotRead(t *testing.T) {
	t.Parallel()
	const bound = 1 << 20
	set := codec.NewSet(codec.GzipLimit(bound))
	at, err := set.Encode(make([]byte, bound))
	if err != nil {
		t.Fatalf("a payload at the bound: %v", err)
	}
	if got, err := set.Open(at); err != nil || len(got) != bound {
		t.Fatalf("a payload at the bound: %d bytes, %v", len(got), err)
	}
	if b, err := set.Encode(make([]byte, bound+1)); err == nil {
		_, openErr := set.Open(b)
		t.Fatalf("a payload past the bound was encoded (%d bytes), and its own set cannot open it: %v", len(b), openErr)
	}
	// Stacked under a key the same holds: the deflate layer refuses, so nothing is sealed.
	if _, err := codec.NewSet(codec.Stack(codec.GzipLimit(bound), aes(t, "k1", "k1"))).Encode(make([]byte, bound+1)); err == nil {
		t.Error("a stack encoded a payload its deflate layer cannot read back")
	}
}

// A bound of the largest int means no bound: it opened every payload as empty, with no error,
// because the reader's limit (the bound plus one) wrapped to a negative number.
func TestGzipLimitOfTheLargestIntOpensEveryPayload(t *testing.T) {
	t.Parallel()
	plain := bytes.Repeat([]byte("order 4242 "), 100)
	for _, n := range []int{math.MaxInt, math.MaxInt - 1} {
		set := codec.NewSet(codec.GzipLimit(n))
		b, err := set.Encode(plain)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := set.Open(b); err != nil || !bytes.Equal(got, plain) {
			t.Errorf("GzipLimit(%d): opened %d bytes of %d, %v", n, len(got), len(plain), err)
		}
	}
}
