package measure

import "time"

// Window measures CPU over an interval: the whole machine, this process, the Postgres server
// (when its postmaster is known and local), and every process outside the benchmark. The
// machine's busy time not accounted for by this process or Postgres is "other": the kernel's
// work on the workload's behalf (loopback networking in softirq, block I/O workers) plus
// whatever else ran. Foreign isolates the second part, measured process by process, so that a
// build or test run sharing the machine is told apart from the workload's own kernel time.
type Window struct {
	postmaster int
	roots      []int
	cpu        CPUTimes
	pg         uint64
	pgOK       bool
	foreign    uint64
	foreignOK  bool
	self       time.Duration
	start      time.Time
}

// Usage is a Window's result. All shares are percentages of all cores.
type Usage struct {
	Wall     time.Duration
	Machine  float64
	Self     float64
	Postgres float64 // negative when unknown
	Foreign  float64 // negative when unknown
}

// StartWindow takes the opening readings. postmaster may be 0 when the server is not local;
// ours lists the roots of the benchmark's own process tree (the orchestrating bench process).
func StartWindow(postmaster int, ours ...int) (*Window, error) {
	w := &Window{postmaster: postmaster, roots: append([]int{postmaster}, ours...)}
	var err error
	if postmaster > 0 {
		w.pg, err = PostgresTicks(postmaster)
		w.pgOK = err == nil
	}
	w.foreign, err = ForeignTicks(w.roots...)
	w.foreignOK = err == nil
	if w.cpu, err = ReadCPU(); err != nil {
		return nil, err
	}
	w.self = SelfCPU()
	w.start = time.Now()
	return w, nil
}

// Stop takes the closing readings.
func (w *Window) Stop() Usage {
	u := Usage{Wall: time.Since(w.start), Postgres: -1, Foreign: -1}
	self := SelfCPU()
	cpu, err := ReadCPU()
	if err != nil {
		return u
	}
	u.Machine = BusyPercent(w.cpu, cpu)
	u.Self = ShareOfMachine(self-w.self, u.Wall)
	if w.pgOK {
		if pg, err := PostgresTicks(w.postmaster); err == nil && pg >= w.pg {
			u.Postgres = TicksShare(pg-w.pg, w.cpu, cpu)
		}
	}
	if w.foreignOK {
		if f, err := ForeignTicks(w.roots...); err == nil {
			// A foreign process that exited unreaped (or whose reaper exited) takes its
			// time with it, so the sum can go down; count that as nothing seen.
			u.Foreign = 0
			if f > w.foreign {
				u.Foreign = TicksShare(f-w.foreign, w.cpu, cpu)
			}
		}
	}
	return u
}
