package replay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/history"
	"github.com/ultimat3/jobs/replay"
)

// slowRecorder answers every record as an engine would, after a fixed latency (the round trip
// to the engine and its group commit).
type slowRecorder struct {
	latency time.Duration
	mu      sync.Mutex
	seq     int64
	records int
}

func (s *slowRecorder) Record(ctx context.Context, cmds []frontend.Command) (frontend.RecordResponse, error) {
	time.Sleep(s.latency)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records++
	return answerSteps(&s.seq, cmds), nil
}

// BenchmarkParallelSteps runs a body that starts N parallel steps and awaits them all, against a
// recorder with a fixed latency (2ms). The body spends 1ms preparing each step before starting
// it, and each step returns at once, so earlier steps are recording while later ones start: a Go
// that waited for the record in flight would start the next step only after it. The time per run
// shows what starting a step costs while another's record is on the wire; records/run is how
// many records the N results took.
func BenchmarkParallelSteps(b *testing.B) {
	const latency, prepare = 2 * time.Millisecond, time.Millisecond
	for _, n := range []int{2, 8, 32} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			def := jobs.MustDefine("fan", func(in string) string { return in }, jobs.NoTenant[string](),
				func(c *jobs.Ctx, in string) (int, error) {
					fs := make([]jobs.Awaitable, n)
					for i := range fs {
						time.Sleep(prepare)
						fs[i] = jobs.Go(c, fmt.Sprintf("s%d", i), func(context.Context) (int, error) { return i, nil })
					}
					return n, jobs.AwaitAll(c, fs...)
				})
			input, _ := jobs.Encode("x")
			started := history.New(time.Now(), history.RunStarted{Job: "fan", Queue: jobs.DefaultQueue, Input: input, Key: "x", NoTenant: true})
			started.Seq = 1
			records := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec := &slowRecorder{latency: latency, seq: 1}
				ex, out, err := replay.Start(context.Background(), replay.Config{Def: def, Info: jobs.RunInfo{RunID: "r", Job: "fan", Attempt: 1}, Recorder: rec}, []history.Event{started})
				if err != nil {
					b.Fatal(err)
				}
				if o := <-out; o.Kind != replay.Completed {
					b.Fatalf("outcome %v: %v", o.Kind, o.Err)
				}
				<-ex.Exited()
				records += rec.records
			}
			b.ReportMetric(float64(records)/float64(b.N), "records/run")
		})
	}
}
