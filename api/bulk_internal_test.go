package api

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
)

// A msgpack bulk body's item count is read from the items array's header in both forms msgpack
// decodes a struct from: the map form and the array form (fields in order). The array form was
// read as zero, so a body of 60,000 empty items was decoded whole, every request made, before the
// count after decoding refused it.
func TestBulkMsgpackItemsReadsBothForms(t *testing.T) {
	const items = jobs.MaxEnqueueMany + 10_000
	tail := bytes.Repeat([]byte{0x80}, items)
	for name, head := range map[string][]byte{
		"map":   {0x81, 0xa5, 'i', 't', 'e', 'm', 's', 0xdc, items >> 8, items & 0xff},
		"array": {0x91, 0xdc, items >> 8, items & 0xff},
	} {
		if n := bulkMsgpackItems(append(append([]byte(nil), head...), tail...)); n != items {
			t.Errorf("%s form: %d items read, want %d", name, n, items)
		}
	}

	// What the encoder writes in the array form decodes as the map form does, and is counted.
	reqs := []jobs.EnqueueRequest{{Job: "a"}, {Job: "b"}, {Job: "c"}}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseArrayEncodedStructs(true)
	if err := enc.Encode(BulkEnqueueRequest{Items: reqs}); err != nil {
		t.Fatal(err)
	}
	if n := bulkMsgpackItems(buf.Bytes()); n != len(reqs) {
		t.Errorf("an encoded array form: %d items read, want %d", n, len(reqs))
	}
	var back BulkEnqueueRequest
	if err := msgpack.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Items) != len(reqs) || back.Items[2].Job != "c" {
		t.Errorf("the array form decodes to %+v, %v", back, err)
	}

	for name, b := range map[string][]byte{
		"empty array":       {0x90},
		"array of a string": {0x91, 0xa1, 'x'},
		"a string":          {0xa1, 'x'},
		"truncated header":  {0x91, 0xdc, 0xff},
	} {
		if n := bulkMsgpackItems(b); n != 0 {
			t.Errorf("%s: %d items read, want 0", name, n)
		}
	}
}
