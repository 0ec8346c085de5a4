package jobs

import (
	"context"
	"errors"
	"strconv"
	"sync"
)

// Parallel steps: several durable steps of one run in flight at once. Each is a Step in every
// respect but one: its result is matched on replay by its name, not by its position among the
// run's durable calls, because steps that run side by side finish (and are recorded) in whatever
// order they finish. Go starts one; Await, AwaitAll and AwaitFirst wait for them.
//
//	a := jobs.Go(c, "quote:fedex", quoteFedex)
//	b := jobs.Go(c, "quote:ups", quoteUPS)
//	if err := jobs.AwaitAll(c, a, b); err != nil { … }
//	fedex, _ := a.Await(c)
//
// A run never suspends (sleeps, waits) or returns with a parallel step still in flight: the
// suspension or the return waits for it to settle first, so its result is recorded while the
// run still holds its claim.

// Promise is a parallel step's outcome as a runtime delivers it: settled once, with the
// recorded output and the seq that recorded it, or with the step's error. It is for runtimes,
// not for job code (which uses Future).
type Promise struct {
	once sync.Once
	done chan struct{}
	out  []byte
	seq  int64
	err  error
}

// NewPromise returns an unsettled promise.
func NewPromise() *Promise { return &Promise{done: make(chan struct{})} }

// Settle settles the promise; only the first call counts.
func (p *Promise) Settle(out []byte, seq int64, err error) {
	p.once.Do(func() {
		p.out, p.seq, p.err = out, seq, err
		close(p.done)
	})
}

// Done is closed when the promise is settled.
func (p *Promise) Done() <-chan struct{} { return p.done }

// Outcome returns the settled outcome; call it after Done.
func (p *Promise) Outcome() (out []byte, seq int64, err error) { return p.out, p.seq, p.err }

// Parallel is implemented by runtimes that can run durable steps side by side (the worker's
// replay runtime).
type Parallel interface {
	// Go returns a settled promise for a recorded parallel step named name, or runs fn on its
	// own goroutine and records its output when it returns.
	Go(c *Ctx, name string, fn func(context.Context) ([]byte, error)) *Promise
}

// Future is a parallel step started by Go.
type Future[T any] struct {
	name string
	p    *Promise
}

// Go starts the durable step name running fn beside the body, and returns at once. Like Step it
// runs fn once ever per run and records its result; names are shared with every other durable
// call of the run and must be unique (X_STEP_DUPLICATE). A recorded step is not run again: its
// Future is settled from the history at once, whatever order the steps finished in.
func Go[T any](c *Ctx, name string, fn func(ctx context.Context) (T, error)) *Future[T] {
	f := &Future[T]{name: name}
	par, ok := rtOf(c).(Parallel)
	if !ok {
		f.p = NewPromise()
		f.p.Settle(nil, 0, Errorf(CodeInvariant, "step %q: this runtime cannot run steps in parallel", name))
		return f
	}
	f.p = par.Go(c, name, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		return Encode(v)
	})
	return f
}

// Name is the step's durable name.
func (f *Future[T]) Name() string { return f.name }

// Await waits for the step and returns its result, or its error; the other steps keep their
// results. A step's failure is recorded with the body's next durable call (or before it
// completes), and a replay settles the future with the same text and code without running the
// step, as for a failed Step; a failure the body returns before its next durable call is not,
// and the retry runs the step again. Await may be called any number of times.
func (f *Future[T]) Await(c *Ctx) (T, error) {
	var zero T
	if err := wait(c, f.name, f.p); err != nil {
		return zero, err
	}
	out, _, err := f.p.Outcome()
	if err != nil {
		return zero, err
	}
	// The recorded value, decoded, live as on replay (see Step).
	var v T
	if err := Decode(out, &v); err != nil {
		return zero, err
	}
	return v, nil
}

func (f *Future[T]) promise() *Promise { return f.p }

// Awaitable is a Future of any type, for AwaitAll and AwaitFirst.
type Awaitable interface {
	Name() string
	promise() *Promise
}

// wait waits for p to settle, or for the attempt to end. An attempt's end is said as a step
// says it: the jobs error it ended with (X_ABORTED, X_TIMEOUT, X_JOB_LEASE_LOST), else
// X_ABORTED, never a bare context error without a code. A promise settled by then stands: of
// two ready cases a select picks either, and a body awaiting a step that had finished would
// have been told the attempt ended one time in two.
func wait(c *Ctx, name string, p *Promise) error {
	select {
	case <-p.Done():
		return nil
	case <-c.Done():
	}
	select {
	case <-p.Done():
		return nil
	default:
	}
	return attemptEnded(c, name)
}

// attemptEnded is the error of an await the attempt's end cut short.
func attemptEnded(c *Ctx, name string) error {
	cause := context.Cause(c)
	var e *Error
	if errors.As(cause, &e) {
		return e
	}
	return Wrap(CodeAborted, cause, "the attempt ended while it awaited %s", name)
}

// AwaitAll waits for every future to settle and returns nil when all succeeded, else their
// errors joined, in argument order. The values are read with each future's Await.
func AwaitAll(c *Ctx, fs ...Awaitable) error {
	var errs []error
	for _, f := range fs {
		if err := wait(c, f.Name(), f.promise()); err != nil {
			return err
		}
		if _, _, err := f.promise().Outcome(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// AwaitFirst waits until one of the futures has succeeded and returns its index. "First" is by
// the order the results were recorded in, so a replay returns the same future the live run did,
// even when all of them are already settled. A failure does not end the wait while another
// future may still succeed; when every one fails, it returns -1 and their errors joined.
func AwaitFirst(c *Ctx, fs ...Awaitable) (int, error) {
	if len(fs) == 0 {
		return -1, Errorf(CodeBadRequest, "AwaitFirst needs at least one future")
	}
	for {
		best, bestSeq, pending := -1, int64(0), 0
		var errs []error
		for i, f := range fs {
			p := f.promise()
			select {
			case <-p.Done():
				_, seq, err := p.Outcome()
				if err != nil {
					errs = append(errs, err)
				} else if best < 0 || seq < bestSeq {
					best, bestSeq = i, seq
				}
			default:
				pending++
			}
		}
		if best >= 0 {
			// One look more. The runtime settles a record's futures in the order they were
			// recorded, each record's before the next begins, so every future recorded before
			// the best one was settled before it; but the scan above reads the futures one by
			// one while they settle, and may have passed an earlier-recorded one (a lower
			// index) just before it settled, then found a later one settled. Each future seen
			// settled now that was recorded earlier was settled by the time the best was seen.
			for i, f := range fs {
				p := f.promise()
				select {
				case <-p.Done():
					if _, seq, err := p.Outcome(); err == nil && seq < bestSeq {
						best, bestSeq = i, seq
					}
				default:
				}
			}
			return best, nil
		}
		if pending == 0 {
			return -1, errors.Join(errs...)
		}
		// Wait for any one to settle, then look again.
		settled := make(chan struct{}, 1)
		stop := make(chan struct{})
		for _, f := range fs {
			go func(p *Promise) {
				select {
				case <-p.Done():
					select {
					case settled <- struct{}{}:
					default:
					}
				case <-stop:
				}
			}(f.promise())
		}
		select {
		case <-settled:
		case <-c.Done():
			close(stop)
			return -1, attemptEnded(c, "the first of "+strconv.Itoa(len(fs))+" steps")
		}
		close(stop)
	}
}
