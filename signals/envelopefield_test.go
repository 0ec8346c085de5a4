package signals_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/signals"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
)

// fieldsSeen is a store that remembers the match fields of the last event it was handed.
type fieldsSeen struct {
	store.Store
	fields []string
}

func (s *fieldsSeen) RunPublish(ctx context.Context, p store.PublishParams) (store.PublishResult, error) {
	s.fields = p.Fields
	return s.Store.RunPublish(ctx, p)
}

// A payload may carry a codec's envelope in a field (every surface stores and shows one at any
// depth, wire.Value): published without match fields, it is matched on its other fields. The
// engine decoded the whole payload to read its fields, msgpack knows no envelope extension, and
// the event was refused as "not msgpack" (X_ENCODING), though the field a wait matches on was
// in the clear beside it.
func TestAPayloadCarryingAnEnvelopeIsMatchedOnItsOtherFields(t *testing.T) {
	t.Parallel()
	st := &fieldsSeen{Store: memory.New()}
	s := signals.New(signals.Config{Store: st})
	env, err := codec.Seal("aesgcm/k1", true, []byte("sealed card"))
	if err != nil {
		t.Fatal(err)
	}
	// {"orderId": "o-1", "card": <envelope>, "cards": [<envelope>]}
	p := []byte{0x83, 0xa7, 'o', 'r', 'd', 'e', 'r', 'I', 'd', 0xa3, 'o', '-', '1', 0xa4, 'c', 'a', 'r', 'd'}
	p = append(p, env...)
	p = append(p, 0xa5, 'c', 'a', 'r', 'd', 's', 0x91)
	p = append(p, env...)
	if _, err := s.Publish(context.Background(), "order.paid", p); err != nil {
		t.Fatalf("a payload with an envelope in a field: %v", err)
	}
	if want := []string{`orderId="o-1"`}; !slices.Equal(st.fields, want) {
		t.Fatalf("fields %q, want %q", st.fields, want)
	}
}
