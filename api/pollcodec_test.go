package api

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
)

// The poll codec (pollcodec.go) must be msgpack's, exactly, as the record codec must.

func randPoll(r *rand.Rand) frontend.PollRequest {
	req := frontend.PollRequest{WorkerID: randText(r), Max: int(randInt(r)), Wait: time.Duration(randInt(r))}
	if n := r.IntN(4) - 1; n >= 0 {
		req.Queues = make([]string, n)
		for i := range req.Queues {
			req.Queues[i] = randText(r)
		}
	}
	if r.IntN(4) == 0 {
		req.Limits = map[string]int{randText(r): int(randInt(r))}
	}
	return req
}

func randTasks(r *rand.Rand) PollResponse {
	var resp PollResponse
	if n := r.IntN(5) - 1; n >= 0 {
		resp.Tasks = make([]frontend.Task, n)
		if r.IntN(10) == 0 {
			resp.Tasks = make([]frontend.Task, 20) // array16
		}
	}
	for i := range resp.Tasks {
		t := frontend.Task{RunID: randText(r), Job: randText(r), Queue: randText(r), Fence: randInt(r),
			Attempt: int(randInt(r)), Input: randBytes(r), Key: randText(r), Tenant: randText(r), NoTenant: r.IntN(2) == 0,
			EnqueuedBy: randText(r), LastSeq: randInt(r), LeaseUntil: randTime(r), Lease: time.Duration(randInt(r)),
			LeaseToken: randText(r), TraceParent: randText(r), TraceState: randText(r)}
		if n := r.IntN(4) - 1; n >= 0 {
			t.Tail = make([]history.Event, n)
			for j := range t.Tail {
				t.Tail[j] = history.Event{Seq: randInt(r), Kind: history.Kind(randText(r)), Name: randText(r),
					At: randTime(r), Data: randBytes(r)}
			}
		}
		resp.Tasks[i] = t
	}
	return resp
}

func TestPollCodecIsMsgpacks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 400; i++ {
		agreesWithMsgpack(t, i, randPoll(r), decodePollRequest)
		agreesWithMsgpack(t, i, randTasks(r), decodePollResponse)
	}
}

// samePollAsMsgpack checks the poll and its answer read from b as msgpack reads them.
func samePollAsMsgpack(t *testing.T, b []byte) {
	t.Helper()
	bothReadAsMsgpack(t, b, decodePollRequest, decodePollResponse)
}

func TestPollCodecReadsAnyBytesAsMsgpack(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	shapes := [][]byte{
		nil, {0xc0}, {0x80}, {0x90},
		msgpackOf(map[string]any{"queues": []any{"a", 1}, "max": 1.5}),
		msgpackOf(map[string]any{"tasks": []any{map[string]any{"lease_until": nil, "no_tenant": nil}}}),
		msgpackOf(map[string]any{"tasks": []any{map[string]any{"tail": []any{map[string]any{"at": "x"}}}}}),
		msgpackOf(map[string]any{"worker_id": "w", "limits": map[string]any{"j": 2}}),
		msgpackOf([]any{"w", []string{"q"}, 1, 2}),
		{0x81, 0xa5, 't', 'a', 's', 'k', 's', 0xdd, 0xff, 0xff, 0xff, 0xff},
	}
	for i := 0; i < 50; i++ {
		q := randPoll(r)
		b, _ := appendMsgpack(nil, &q)
		shapes = append(shapes, b)
		b, _ = appendMsgpack(nil, randTasks(r))
		shapes = append(shapes, b)
	}
	mutated(r, shapes, func(b []byte) { samePollAsMsgpack(t, b) })
}

func FuzzPollCodec(f *testing.F) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 8; i++ {
		q := randPoll(r)
		b, _ := appendMsgpack(nil, &q)
		f.Add(b)
		b, _ = appendMsgpack(nil, randTasks(r))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { samePollAsMsgpack(t, b) })
}

// examplePoll is a 16-slot worker's poll and an answer of nine no-op tasks.
func examplePoll() (frontend.PollRequest, PollResponse) {
	resp := PollResponse{Tasks: make([]frontend.Task, 9)}
	for i := range resp.Tasks {
		resp.Tasks[i] = frontend.Task{RunID: "0194f0c6-8f3a-7c1e-9b2d-3f4a5b6c7d8e", Job: "noop", Queue: "default",
			Fence: 1 << 33, Attempt: 1, Input: []byte{0x01}, Key: "0194f0c6-8f3a-7c1e-9b2d-3f4a5b6c7d8e", NoTenant: true,
			LastSeq: 1, LeaseUntil: time.Now(), Lease: 30 * time.Second, LeaseToken: "tttttttttttttttttttttttttttttttttttttttttt0"}
	}
	return frontend.PollRequest{WorkerID: "worker-1234", Queues: []string{"default"}, Max: 16, Wait: 30 * time.Second}, resp
}

func BenchmarkPollCodec(b *testing.B) {
	req, resp := examplePoll()
	benchmarkCodec(b, "poll-codec", req, resp, decodePollRequest, decodePollResponse)
}
