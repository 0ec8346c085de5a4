package codec_test

import (
	"testing"

	"github.com/ultimat3/jobs/codec"
)

// A Stack built from an empty list (a configuration that names no codec) is an error on encode,
// not a panic in the worker's record path; it handles no payload, and a plain one passes through.
func TestAnEmptyStackRefusesInsteadOfPanicking(t *testing.T) {
	t.Parallel()
	set := codec.NewSet(codec.Stack())
	if b, err := set.Encode([]byte{0xa1, 'x'}); err == nil {
		t.Errorf("an empty stack encoded: %x", b)
	}
	if got, err := set.Open([]byte{0xa1, 'x'}); err != nil || string(got) != "\xa1x" {
		t.Errorf("a plain payload through an empty stack: %x, %v", got, err)
	}
	sealed, _ := codec.NewSet(codec.Gzip()).Encode([]byte{0xa1, 'x'})
	if _, err := set.Open(sealed); err == nil {
		t.Error("an empty stack opened a deflate payload")
	}
}
