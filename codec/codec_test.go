package codec_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/codec/aesgcm"
	"github.com/ultimat3/jobs/internal/wire"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func aes(t *testing.T, current string, ids ...string) *aesgcm.Codec {
	t.Helper()
	keys := map[string][]byte{}
	for i, id := range ids {
		keys[id] = key(byte(i + 1))
	}
	c, err := aesgcm.New(current, keys)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnvelopeRoundTripsAtEverySize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 200, 300, 70_000} {
		data := bytes.Repeat([]byte{0xab}, n)
		b, err := codec.Seal("gzip-ish", false, data)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := codec.Unseal(b)
		if !ok || e.ID != "gzip-ish" || !bytes.Equal(e.Data, data) || e.Encrypted {
			t.Fatalf("%d bytes: unsealed %v %+v", n, ok, e.ID)
		}
		// An envelope is one msgpack value the engine's checks accept as it is.
		if err := wire.Value(b); err != nil {
			t.Errorf("%d bytes: wire.Value refuses an envelope: %v", n, err)
		}
	}
	// Plain msgpack is never an envelope; nor is a truncated one.
	plain, _ := jobs.Encode(map[string]any{"a": 1})
	if codec.IsEnvelope(plain) {
		t.Error("plain msgpack taken for an envelope")
	}
	b, _ := codec.Seal("x", false, []byte("data"))
	if codec.IsEnvelope(b[:len(b)-1]) {
		t.Error("a truncated envelope taken for one")
	}
	if _, err := codec.Seal("", false, nil); err == nil {
		t.Error("an empty id was accepted")
	}
	if _, err := codec.Seal("a\nb", false, nil); err == nil {
		t.Error("an id with a newline was accepted")
	}
}

func TestSetEncodesAndOpens(t *testing.T) {
	t.Parallel()
	plain, _ := jobs.Encode(map[string]any{"card": "4242 4242 4242 4242", "note": strings.Repeat("x", 2000)})
	for _, c := range []codec.Codec{codec.Gzip(), aes(t, "k1", "k1"), codec.Stack(codec.Gzip(), aes(t, "k1", "k1"))} {
		set := codec.NewSet(c)
		b, err := set.Encode(plain)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("4242")) && c.ID() != "deflate" {
			t.Errorf("%s: the plaintext is in the payload", c.ID())
		}
		got, err := set.Open(b)
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("%s: open: %v", c.ID(), err)
		}
		// A plain payload (written before a codec was configured) passes through.
		if got, err := set.Open(plain); err != nil || !bytes.Equal(got, plain) {
			t.Errorf("%s: plain payload: %v", c.ID(), err)
		}
		// Without the codec, the payload says what it is, and jobs.Decode says which codec.
		what, _ := codec.Describe(b)
		var v any
		if err := jobs.Decode(b, &v); jobs.CodeOf(err) != jobs.CodeEncoding || !strings.Contains(err.Error(), c.ID()) {
			t.Errorf("%s: jobs.Decode of an envelope: %v", c.ID(), err)
		}
		if js, err := jobs.ToJSON(b); err != nil || !strings.Contains(string(js), "by codec "+c.ID()) {
			t.Errorf("%s: ToJSON = %s, %v (%s)", c.ID(), js, err, what)
		}
	}
	b, _ := codec.NewSet(aes(t, "k1", "k1")).Encode(plain)
	if what, _ := codec.Describe(b); !strings.HasPrefix(what, "encrypted by codec aesgcm/k1, ") {
		t.Errorf("describe: %q", what)
	}
	if _, err := codec.NewSet(codec.Gzip()).Open(b); !errors.Is(err, codec.ErrUnknownCodec) {
		t.Errorf("open without the key: %v", err)
	}
	// Peel opens what it can and hands back the innermost envelope it cannot, here a Stack's
	// compression under the key the Set holds; Open gives nothing back.
	a := aes(t, "k1", "k1")
	stacked, _ := codec.NewSet(codec.Stack(codec.Gzip(), a)).Encode(plain)
	rest, err := codec.NewSet(a).Peel(stacked)
	if what, _ := codec.Describe(rest); !errors.Is(err, codec.ErrUnknownCodec) || !strings.HasPrefix(what, "encoded by codec deflate, ") {
		t.Errorf("peel without deflate: %q, %v", what, err)
	}
	if got, err := codec.NewSet(a).Open(stacked); got != nil || !errors.Is(err, codec.ErrUnknownCodec) {
		t.Errorf("open without deflate: %d bytes, %v", len(got), err)
	}
	if got, err := codec.NewSet(codec.Stack(codec.Gzip(), a)).Peel(stacked); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("peel with the stack: %v", err)
	}
}

// Rotation: payloads written under k1 still open once k2 is current, as long as k1 is kept;
// a tampered payload or one moved under another key id never opens.
func TestAESGCMKeyRotation(t *testing.T) {
	t.Parallel()
	plain, _ := msgpack.Marshal("secret")
	old := codec.NewSet(aes(t, "k1", "k1"))
	b1, _ := old.Encode(plain)
	rotated := codec.NewSet(aes(t, "k2", "k1", "k2"))
	b2, _ := rotated.Encode(plain)
	if e, _ := codec.Unseal(b2); e.ID != "aesgcm/k2" {
		t.Fatalf("rotated set wrote under %s", e.ID)
	}
	for _, b := range [][]byte{b1, b2} {
		if got, err := rotated.Open(b); err != nil || !bytes.Equal(got, plain) {
			t.Errorf("rotated set: %v", err)
		}
	}
	if _, err := old.Open(b2); err == nil {
		t.Error("the old set opened a k2 payload")
	}
	// Without k1 the old payloads are unreadable: a key is retired only when no payload needs it.
	if _, err := codec.NewSet(aes(t, "k2", "k2")).Open(b1); err == nil {
		t.Error("opened a k1 payload without k1")
	}
	tampered := bytes.Clone(b1)
	tampered[len(tampered)-1] ^= 1
	if _, err := old.Open(tampered); err == nil {
		t.Error("a tampered payload opened")
	}
	e, _ := codec.Unseal(b1)
	moved, _ := codec.Seal("aesgcm/k2", true, e.Data)
	if _, err := rotated.Open(moved); err == nil {
		t.Error("a k1 ciphertext relabelled k2 opened")
	}
	if _, err := aesgcm.New("k3", map[string][]byte{"k1": key(1)}); err == nil {
		t.Error("a current key that is not among the keys was accepted")
	}
	if _, err := aesgcm.New("k1", map[string][]byte{"k1": []byte("short")}); err == nil {
		t.Error("a short key was accepted")
	}
}

func TestGzipBoundsInflation(t *testing.T) {
	t.Parallel()
	set := codec.NewSet(codec.GzipLimit(1 << 20))
	fits, _ := set.Encode(make([]byte, 1<<20))
	if _, err := set.Open(fits); err != nil {
		t.Errorf("a payload at the bound: %v", err)
	}
	// Written by a codec with a larger bound (this one refuses to write it).
	huge, _ := codec.NewSet(codec.Gzip()).Encode(make([]byte, 1<<20+1))
	if _, err := set.Open(huge); err == nil {
		t.Error("a payload inflating past the bound opened")
	}
}
