package wire_test

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/internal/wire"
)

// A value under the envelope's extension type is stored only when it is an envelope a codec
// wrote (codec.Seal), at the top or inside: every surface shows such a value, and another body
// under that type was stored and then shown by none (each view failed on an extension msgpack
// does not know).
func TestValueTakesOnlyWellFormedEnvelopes(t *testing.T) {
	env, err := codec.Seal("aesgcm/k1", true, []byte("sealed card"))
	if err != nil {
		t.Fatal(err)
	}
	inMap := append([]byte{0x81, 0xa4, 'c', 'a', 'r', 'd'}, env...)
	for name, b := range map[string][]byte{"whole": env, "in a map": inMap, "in an array": append([]byte{0x91}, env...)} {
		if err := wire.Value(b); err != nil {
			t.Errorf("an envelope %s: %v", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"a fixext form":             {0xd6, codec.ExtType, 0x00, 0x01, 'x', 0x00},
		"an id of no bytes":         {0xc7, 0x03, codec.ExtType, 0x00, 0x00, 'x'},
		"an id past the body":       {0xc7, 0x03, codec.ExtType, 0x00, 0x09, 'x'},
		"a body of one byte":        {0xc7, 0x01, codec.ExtType, 0x00},
		"a bad one inside a map":    {0x81, 0xa1, 'a', 0xd6, codec.ExtType, 0x00, 0x01, 'x', 0x00},
		"a bad one inside an array": {0x91, 0xc7, 0x03, codec.ExtType, 0x00, 0x00, 'x'},
	} {
		if err := wire.Value(b); !jobs.HasCode(err, jobs.CodeBadRequest) {
			t.Errorf("%s: %v, want %s", name, err, jobs.CodeBadRequest)
		}
	}
}
