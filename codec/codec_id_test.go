package codec_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/codec/aesgcm"
	"github.com/ultimat3/jobs/internal/wire"
)

// crafted is an envelope as any caller can store it (wire.Value takes every extension of type
// codec.ExtType): its id is whatever bytes the caller put there, not one Seal would write.
func crafted(id string) []byte {
	body := append([]byte{1, byte(len(id))}, id...)
	return append([]byte{0xc7, byte(len(body)), codec.ExtType}, body...)
}

// Two stored payloads whose codec ids differ are described differently. Ids that are not valid
// UTF-8 ("aesgcm/k\xff", "aesgcm/k\xfe") both rendered as "aesgcm/k\ufffd" in every JSON view
// (jobs show, the dump, the console), so an operator could not tell which key a payload needs;
// and an id a caller crafted with a line break or a terminal escape put it in the description,
// and so in the X_ENCODING text a worker records. Such an id is shown quoted.
func TestDescribedCodecIDsAreNeverConfusedOrRaw(t *testing.T) {
	t.Parallel()
	a, b := crafted("aesgcm/k\xff"), crafted("aesgcm/k\xfe")
	for _, p := range [][]byte{a, b, crafted("a\nb"), crafted("x\x1b[2Jy")} {
		if err := wire.Value(p); err != nil {
			t.Fatalf("%x: the engine refuses it (%v); the test assumes a caller can store it", p, err)
		}
	}
	ja, err := jobs.ToJSON(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := jobs.ToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(ja, jb) {
		t.Errorf("two ids shown alike: %s", ja)
	}
	for _, id := range []string{"a\nb", "x\x1b[2Jy", "aesgcm/k\xff"} {
		what, ok := codec.Describe(crafted(id))
		if !ok || strings.ContainsFunc(what, func(r rune) bool { return !unicode.IsPrint(r) }) || strings.Contains(what, "\xff") {
			t.Errorf("id %q described as %q", id, what)
		}
		var v any
		if err := jobs.Decode(crafted(id), &v); strings.ContainsAny(err.Error(), "\n\x1b\xff") {
			t.Errorf("id %q: the decode error carries it raw: %q", id, err)
		}
	}
	// A plain id reads as before.
	if what, _ := codec.Describe(crafted("aesgcm/k1")); what != "encrypted by codec aesgcm/k1, 0 bytes" {
		t.Errorf("a plain id described as %q", what)
	}
}

// Key ids and codec ids are printable text, as the docs say: an id that is not valid UTF-8, or
// holds an invisible or control character, is refused where it is configured, before a payload
// is written under it.
func TestKeyIDsArePrintableText(t *testing.T) {
	t.Parallel()
	if _, err := aesgcm.New("", map[string][]byte{"": key(1)}); err == nil {
		t.Error("an empty key id accepted")
	}
	for _, id := range []string{"k\xff", "k1\u200b", "k1\u00a0", "k\u202e1"} {
		if _, err := aesgcm.New(id, map[string][]byte{id: key(1)}); err == nil {
			t.Errorf("key id %q accepted", id)
		}
		if _, err := codec.Seal("aesgcm/"+id, true, nil); err == nil {
			t.Errorf("codec id %q sealed", "aesgcm/"+id)
		}
	}
	for _, id := range []string{"k1", "2026-03", "clé-1"} {
		if _, err := aesgcm.New(id, map[string][]byte{id: key(1)}); err != nil {
			t.Errorf("key id %q: %v", id, err)
		}
	}
}
