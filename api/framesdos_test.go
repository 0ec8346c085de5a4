package api_test

import (
	"context"
	"encoding/binary"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/clock"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/testenv"
	"github.com/ultimat3/jobs/store/memory"
)

// heapPeak runs f and returns how far the heap grew above where it was before, sampled while f
// runs. The measuring tests do not run in parallel: the heap is the process's.
func heapPeak(f func()) uint64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak.Store(max(peak.Load(), ms.HeapAlloc))
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	if p := peak.Load(); p > base.HeapAlloc {
		return p - base.HeapAlloc
	}
	return 0
}

// emptyMaps appends an array header of n items and n empty maps (a byte each): what a decoder
// makes a whole struct of for each.
func emptyMaps(b []byte, n int) []byte {
	b = append(b, 0xdc, byte(n>>8), byte(n))
	for range n {
		b = append(b, 0x80)
	}
	return b
}

// keyed appends a msgpack str key.
func keyed(b []byte, k string) []byte { return append(append(b, 0xa0|byte(len(k))), k...) }

// A body is small and its decoded request is a small multiple of it: an array's items are
// checked against the request's bound on the array's header, before anything is made for them.
// A 2 MB batch of 31 records of 65,535 empty commands each made an 860 MB heap (and took
// seconds) before it was refused for its size; a framed record of 64 KB made 20 MB, a hundred of
// them on one connection 1.7 GB. Each is refused X_BAD_REQUEST now, at the cost of reading it.
func TestOversizedArraysAreRefusedBeforeTheyAreMade(t *testing.T) {
	b := setup(t, api.Config{})
	batch := keyed([]byte{0x81}, "records")
	batch = append(batch, 0xdc, 0, 31)
	for range 31 {
		batch = emptyMaps(keyed(append(batch, 0x81), "commands"), 0xffff)
	}
	record := emptyMaps(keyed(keyed(keyed([]byte{0x82}, "run_id"), "x"), "commands"), 0xffff)
	// The same record as an array of its fields, which msgpack's decoder also reads.
	rt := reflect.TypeFor[frontend.RecordRequest]()
	asArray := []byte{0x90 | byte(rt.NumField())}
	for i := range rt.NumField() {
		switch strings.Split(rt.Field(i).Tag.Get("msgpack"), ",")[0] {
		case "run_id":
			asArray = keyed(asArray, "x")
		case "commands":
			asArray = emptyMaps(asArray, 0xffff)
		default:
			asArray = append(asArray, 0xc0)
		}
	}
	records := func(n, commands int) []byte {
		out := keyed([]byte{0x81}, "records")
		out = append(out, 0xdc, byte(n>>8), byte(n))
		for range n {
			out = emptyMaps(keyed(keyed(keyed(append(out, 0x82), "run_id"), "x"), "commands"), commands)
		}
		return out
	}
	beat := emptyMaps(keyed(keyed(keyed([]byte{0x82}, "worker_id"), "w"), "leases"), 0xffff)
	for _, c := range []struct {
		name, path string
		body       []byte
	}{
		{"a batch of 31 records of 65535 commands", "/v1/worker/records", batch},
		{"a batch of 15 records of 65535 commands", "/v1/worker/records", records(15, 0xffff)},
		{"a record of 65535 commands", "/v1/worker/record", record},
		{"a record of 65535 commands, as an array", "/v1/worker/record", asArray},
		{"a batch of 257 records", "/v1/worker/records", records(257, 0)},
		{"a batch with a record of 1025 commands", "/v1/worker/records", records(2, 1025)},
		// Each record within its bound, the batch past its total: 256 records of 1,024 empty
		// commands decoded to about 80 MB.
		{"a batch of 256 records of 1024 commands", "/v1/worker/records", records(256, 1024)},
		{"a batch of 5 records of 1000 commands", "/v1/worker/records", records(5, 1000)},
		{"a heartbeat of 65535 leases", "/v1/worker/heartbeat", beat},
	} {
		var st int
		var out []byte
		grew := heapPeak(func() {
			st, _, out = b.call(t, http.MethodPost, c.path, api.ContentMsgpack, "", c.body)
		})
		var e jobs.Error
		_ = msgpack.Unmarshal(out, &e)
		t.Logf("%s (%d bytes): %d %s; heap grew %d KB", c.name, len(c.body), st, e.Message, grew>>10)
		if st != http.StatusBadRequest || e.Code != jobs.CodeBadRequest {
			t.Errorf("%s: %d %+v; want 400 X_BAD_REQUEST", c.name, st, e)
		}
		if grew > 32<<20 {
			t.Errorf("%s of %d bytes grew the heap by %d MB; want a small multiple of the body", c.name, len(c.body), grew>>20)
		}
	}
	// At the bounds, a request is decoded and answered as before.
	if st, _, out := b.call(t, http.MethodPost, "/v1/worker/records", api.ContentMsgpack, "", records(256, 1)); st != http.StatusOK {
		t.Errorf("a batch of 256 records: %d %s; want 200", st, out)
	}

	// Framed: a hundred records of 65,535 commands on one connection.
	m := dialMux(t, b.url)
	const calls = 100
	codes := map[int]int{}
	grew := heapPeak(func() {
		go func() {
			frame := make([]byte, 9, 9+len(record))
			for id := uint32(1); id <= calls; id++ {
				frame = frame[:9]
				binary.BigEndian.PutUint32(frame, uint32(len(record)))
				frame[4] = 1
				binary.BigEndian.PutUint32(frame[5:], id)
				if _, err := m.conn.Write(append(frame, record...)); err != nil {
					return
				}
			}
		}()
		for range calls {
			st, _, _ := m.read()
			codes[st]++
		}
	})
	t.Logf("%d framed records of %d bytes: %v; heap grew %d MB", calls, len(record), codes, grew>>20)
	if codes[http.StatusBadRequest] != calls {
		t.Errorf("framed records of 65535 commands answered %v; want %d × 400", codes, calls)
	}
	if grew > 64<<20 {
		t.Errorf("%d framed records of %d bytes grew the heap by %d MB; want a small multiple of what was sent", calls, len(record), grew>>20)
	}
}

// A client that sends calls on a multiplexed connection and reads none of the answers holds
// the engine's memory to a bound: past maxPendingBytes of answers queued behind the blocked
// write, the calls wait, and the engine stops reading the connection once its calls in flight
// all wait. 3,000 history reads of a run with a 256 KB input, never read, made a 1.1 GB heap;
// here 4,000 of a 64 KB one, which made about 250 MB.
func TestMuxAnswersQueuedForASlowReaderAreBounded(t *testing.T) {
	env, _, _, url := muxServer(t, api.Config{}, false)
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = 'a'
	}
	in, _ := msgpack.Marshal(string(big))
	res, err := env.Engine.Enqueue(t.Context(), jobs.EnqueueRequest{Job: "j", Key: "k", NoTenant: true, Queue: "q", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := msgpack.Marshal(api.HistoryRequest{RunID: res.RunID})
	m := dialMux(t, url)
	_ = m.conn.SetDeadline(time.Time{})
	// The client's receive buffer is kept small, so what the engine queues is what it holds.
	if tc, ok := m.conn.(interface{ SetReadBuffer(int) error }); ok {
		_ = tc.SetReadBuffer(64 << 10)
	}
	grew := heapPeak(func() {
		go func() {
			frame := make([]byte, 9, 9+len(req))
			for id := uint32(1); id <= 4000; id++ {
				frame = frame[:9]
				binary.BigEndian.PutUint32(frame, uint32(len(req)))
				frame[4] = 3
				binary.BigEndian.PutUint32(frame[5:], id)
				if _, err := m.conn.Write(append(frame, req...)); err != nil {
					return
				}
			}
		}()
		time.Sleep(3 * time.Second)
	})
	t.Logf("4000 history reads of %d KB never read: heap grew %d MB", len(in)>>10, grew>>20)
	// 256 calls in flight, each holding its answer, and two queues of 8 MiB: about 70 MB.
	if grew > 150<<20 {
		t.Errorf("answers queued for a client that reads none grew the heap by %d MB; want it bounded", grew>>20)
	}
}

// Polls waiting on a multiplexed connection do not stop the engine reading it: 300 of them
// (past the 256 calls in flight), and a heartbeat and a poll's cancel frame sent after them are
// acted on at once, not when a poll's wait ends. Past muxMaxPolls a poll is refused
// X_OVERLOADED, and a cancelled poll makes room for the next at once.
func TestMuxPollsDoNotStarveTheConnection(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Store: memory.New(), Clock: clock.Real{}})
	srv, err := api.NewServer(api.Config{Engine: env.Engine, Logger: env.Logger, NoUI: true, MaxPollWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := serveBundle(t, env, srv, "")
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", "q"))
	poll, _ := msgpack.Marshal(frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1, Wait: 10 * time.Second})
	beat, _ := msgpack.Marshal(frontend.HeartbeatRequest{WorkerID: "w"})
	m := dialMux(t, b.url)
	_ = m.conn.SetDeadline(time.Now().Add(20 * time.Second))
	const polls = 300
	for id := uint32(1); id <= polls; id++ {
		m.send(4, id, poll, len(poll))
	}
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	m.send(255, 1, nil, 0) // cancel poll 1
	m.send(2, 1000, beat, len(beat))
	answered := map[uint32]int{}
	for answered[1000] == 0 || answered[1] == 0 { // in either order: the poll answers on its own goroutine
		st, id, _ := m.read()
		answered[id] = st
	}
	if took := time.Since(began); took > 2*time.Second || answered[1] != http.StatusOK {
		t.Fatalf("with %d polls waiting: the heartbeat answered after %v, the cancelled poll %d; want both at once", polls, took, answered[1])
	}

	// Up to the bound (1024 waiting), then one past it.
	for id := uint32(2001); id <= 2001+1024-polls+1; id++ {
		m.send(4, id, poll, len(poll))
	}
	m.send(255, 2, nil, 0)           // a cancel makes room for one more
	m.send(4, 4000, poll, len(poll)) // which this takes
	m.send(2, 5000, beat, len(beat))
	refused := map[uint32]*jobs.Error{}
	for {
		st, id, e := m.read()
		if id == 5000 {
			break
		}
		if st != http.StatusOK {
			refused[id] = e
		}
	}
	last := uint32(2001 + 1024 - polls + 1)
	if len(refused) != 1 || refused[last] == nil || refused[last].Code != jobs.CodeOverloaded {
		t.Fatalf("past %d polls waiting: refused %v; want only poll %d, X_OVERLOADED", 1024, refused, last)
	}
}

// A client whose callers wait in more polls than one multiplexed connection serves sends the
// ones past the bound plain: none is refused, so a worker serving many queues keeps polling
// them all.
func TestClientSendsPollsPastTheMuxBoundPlain(t *testing.T) {
	env, uc, c, _ := muxServer(t, api.Config{MaxPollWait: 10 * time.Second}, false)
	testenv.Declare(t, env.Engine, "w", testenv.Untyped("j", "q"))
	ctx, cancel := context.WithCancel(t.Context())
	const polls = 1100
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range polls {
		wg.Go(func() {
			_, err := c.Poll(ctx, frontend.PollRequest{WorkerID: "w", Queues: []string{"q"}, Max: 1, Wait: 10 * time.Second})
			if err != nil && ctx.Err() == nil {
				failed.Add(1)
				t.Error(err)
			}
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for uc.count("/v1/worker/poll") < polls-1024 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	plain := uc.count("/v1/worker/poll")
	cancel()
	wg.Wait()
	if plain < polls-1024 || failed.Load() > 0 {
		t.Fatalf("%d polls at once: %d went plain, %d failed; want at least %d plain and none failed", polls, plain, failed.Load(), polls-1024)
	}
}
