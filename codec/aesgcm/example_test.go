package aesgcm_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/codec/aesgcm"
)

// Keys rotate by id: encrypt under the newest, keep the older ones for as long as runs that
// started under them may replay. In an application the Set goes to wrap.Frontend (the worker)
// and wrap.Enqueuer (where it enqueues); keys come from a secret store, never from code.
func Example() {
	k1 := bytes.Repeat([]byte{1}, 32)
	k2 := bytes.Repeat([]byte{2}, 32)

	before, _ := aesgcm.New("k1", map[string][]byte{"k1": k1})
	stored, _ := codec.NewSet(before).Encode(mustEncode(map[string]string{"card": "4242"}))

	// What the engine, the CLI and the console show without the key:
	what, _ := codec.Describe(stored)
	fmt.Println(strings.SplitN(what, ",", 2)[0])

	// After the rotation: new payloads under k2, old ones still open.
	after, _ := aesgcm.New("k2", map[string][]byte{"k1": k1, "k2": k2})
	set := codec.NewSet(codec.Stack(codec.Gzip(), after)) // compress, then encrypt
	plain, err := set.Open(stored)
	if err != nil {
		panic(err)
	}
	var v map[string]string
	_ = jobs.Decode(plain, &v)
	fmt.Println(v["card"])

	fresh, _ := set.Encode(plain)
	e, _ := codec.Unseal(fresh)
	fmt.Println(e.ID)
	// Output:
	// encrypted by codec aesgcm/k1
	// 4242
	// aesgcm/k2
}

func mustEncode(v any) []byte {
	b, err := jobs.Encode(v)
	if err != nil {
		panic(err)
	}
	return b
}
