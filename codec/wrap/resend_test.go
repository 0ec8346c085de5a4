package wrap_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ultimat3/jobs/codec/wrap"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
)

// recorder is a frontend that keeps what Record was sent.
type recorder struct {
	frontend.Frontend
	sent []frontend.RecordRequest
}

func (r *recorder) Record(_ context.Context, req frontend.RecordRequest) (frontend.RecordResponse, error) {
	r.sent = append(r.sent, req)
	return frontend.RecordResponse{}, nil
}

// A resend of a record whose answer was lost carries the bytes the first send carried: the engine
// recognises a record that landed by comparing them, and AES-GCM never encrypts twice alike. The
// caller's commands are left plain, so its own resend is not encoded twice.
func TestResendCarriesTheSameCiphertext(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	fe := wrap.Frontend(rec, aesSet(t, "k1", "k1"))
	req := frontend.RecordRequest{RunID: "r1", Fence: 3, AfterSeq: 7, Commands: []frontend.Command{
		{Kind: frontend.CmdStep, Name: "a", Output: []byte{0xa1, 'x'}},
		{Kind: frontend.CmdComplete, Output: []byte{0xa1, 'y'}}}}
	ctx := context.Background()
	if _, err := fe.Record(ctx, req); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(req.Commands[0].Output, []byte{0xa1, 'x'}) {
		t.Fatal("the caller's command was encoded in place")
	}
	req.Retry = true
	if _, err := fe.Record(ctx, req); err != nil {
		t.Fatal(err)
	}
	first, again := rec.sent[0].Commands, rec.sent[1].Commands
	for i := range first {
		if codecOf(first[i].Output) != "aesgcm/k1" || !bytes.Equal(first[i].Output, again[i].Output) {
			t.Errorf("command %d: sent %x then %x; want one envelope, twice", i, first[i].Output, again[i].Output)
		}
	}
	// A new record (not a resend) is encoded afresh.
	req.Retry, req.AfterSeq = false, 9
	if _, err := fe.Record(ctx, req); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(rec.sent[2].Commands[0].Output, first[0].Output) {
		t.Error("a new record reused an old ciphertext")
	}
}

// poller is a frontend whose Poll answers tasks.
type poller struct {
	frontend.Frontend
	tasks []frontend.Task
}

func (p *poller) Poll(context.Context, frontend.PollRequest) ([]frontend.Task, error) {
	return p.tasks, nil
}

// A claim's tail (what the run's wake-up appended, resumed from without a history read) is opened
// as a history read is: the parked body sees the plain payload.
func TestPollOpensTheClaimsTail(t *testing.T) {
	t.Parallel()
	set := aesSet(t, "k1", "k1")
	sealed, err := set.Encode([]byte{0xa1, 'p'})
	if err != nil {
		t.Fatal(err)
	}
	ev := history.New(time.Unix(0, 0), history.EventReceived{WaitName: "w", EventID: "e1", Payload: sealed})
	ev.Seq = 4
	fe := wrap.Frontend(&poller{tasks: []frontend.Task{{RunID: "r1", LastSeq: 4, Tail: []history.Event{ev}}}}, set)
	tasks, err := fe.Poll(context.Background(), frontend.PollRequest{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := tasks[0].Tail[0].Decode()
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(history.EventReceived).Payload; !bytes.Equal(got, []byte{0xa1, 'p'}) {
		t.Errorf("the tail's payload is %x after the codec; want it opened (a1 70)", got)
	}
}
