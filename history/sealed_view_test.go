package history_test

import (
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/history"
)

// A value carrying a codec's envelope inside (an event field a codec sealed) is shown with the
// envelope as a whole sealed value is shown: described without the codec, opened with it. It
// failed whole (msgpack knows no envelope extension), so a dump's view and the run's view showed
// nothing of the value.
func TestAValueWithAnEnvelopeInsideIsShown(t *testing.T) {
	env, err := codec.Seal("aesgcm/k1", true, []byte("sealed card"))
	if err != nil {
		t.Fatal(err)
	}
	// {"orderId": "o-1", "card": <envelope>, "cards": [<envelope>, 2]}
	b := []byte{0x83, 0xa7, 'o', 'r', 'd', 'e', 'r', 'I', 'd', 0xa3, 'o', '-', '1', 0xa4, 'c', 'a', 'r', 'd'}
	b = append(b, env...)
	b = append(b, 0xa5, 'c', 'a', 'r', 'd', 's', 0x92)
	b = append(b, env...)
	b = append(b, 0x02)
	described, _ := codec.Describe(env)
	got, err := history.ValueView(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"orderId": "o-1", "card": described, "cards": []any{described, int8(2)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("view %#v, want %#v", got, want)
	}
	plain, _ := msgpack.Marshal("4242")
	open := func([]byte) ([]byte, error) { return plain, nil }
	got, err = history.ValueView(b, open)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"orderId": "o-1", "card": "4242", "cards": []any{"4242", int8(2)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("view with the codec %#v, want %#v", got, want)
	}
}
