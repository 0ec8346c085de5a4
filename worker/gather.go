package worker

import "runtime"

// Gathering a wave's slots: a group commit's answers ready many bodies at once (in process the
// committer wakes them together; remote, the answers of one commit come back in one write and
// the reader hands them out together), and each body that ends its claim gives its slot back as
// it sends its last record (ahead.go). The first slot given back wakes the poller, and Go runs a
// goroutine woken that way next on the same processor, ahead of the bodies readied before it:
// the poller claimed for that one slot while the rest of the wave's bodies, already runnable,
// had yet to run and give theirs. Claims came back with one or two runs.
//
// So a poller that has other claims in flight yields its processor before it claims, and takes
// the slots given back meanwhile; it yields again while that found more. No timer is involved:
// an idle poller (no other claim of its queue in flight) claims at once, and a yield with nothing
// else runnable returns at once. Unlike the linger (linger.go) it never waits for the next wave,
// only for the bodies the current one has already made runnable.

// gatherRounds is how many yields in a row may find no slot before the poller claims: the bodies
// of a wave may be queued behind one another on both processors.
const gatherRounds = 2

// gather takes the free slots without waiting (each with its held token) and, when other claims
// of the queue are in flight and off is false, yields to the bodies already runnable and takes
// the slots they gave back. It returns the free slots now taken, at most concurrency.
func gather(free, concurrency int, slots, held chan struct{}, off bool) int {
	free = takeFree(free, concurrency, slots, held)
	if off {
		return free
	}
	for empty := 0; empty < gatherRounds && free < concurrency && len(held) > free; {
		runtime.Gosched()
		if n := takeFree(free, concurrency, slots, held); n > free {
			free, empty = n, 0
		} else {
			empty++
		}
	}
	return free
}

// takeFree takes every slot free now, with its held token, up to concurrency.
func takeFree(free, concurrency int, slots, held chan struct{}) int {
	for free < concurrency {
		select {
		case held <- struct{}{}:
		default:
			return free
		}
		select {
		case slots <- struct{}{}:
			free++
		default:
			<-held
			return free
		}
	}
	return free
}
