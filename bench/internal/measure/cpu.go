// Package measure takes the readings the report puts beside every figure: machine CPU from
// /proc/stat, the load generator's own CPU from rusage, and Postgres' per-database counters.
package measure

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUTimes is the machine-wide "cpu" line of /proc/stat, in clock ticks.
type CPUTimes struct {
	Busy, Total uint64
}

// ReadCPU reads /proc/stat. Busy is everything but idle and iowait: time a core spent running
// something, whoever it was (Postgres, the load generator, the kernel on their behalf).
func ReadCPU() (CPUTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[0] != "cpu" {
			continue
		}
		var t CPUTimes
		// user nice system idle iowait irq softirq steal [guest guest_nice]; guest time is
		// already included in user, so only the first eight are summed.
		for i, s := range fields[1:min(len(fields), 9)] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("/proc/stat: %w", err)
			}
			t.Total += v
			if i != 3 && i != 4 { // idle, iowait
				t.Busy += v
			}
		}
		return t, nil
	}
	return CPUTimes{}, fmt.Errorf("/proc/stat: no cpu line")
}

// BusyPercent is the share of all cores' time that was busy between a and b (0–100).
func BusyPercent(a, b CPUTimes) float64 {
	if b.Total <= a.Total {
		return 0
	}
	return 100 * float64(b.Busy-a.Busy) / float64(b.Total-a.Total)
}

// SelfCPU returns the user+system CPU time consumed so far by this process (all threads).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return RusageCPU(&ru)
}

// RusageCPU sums user and system time of a rusage record.
func RusageCPU(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ShareOfMachine expresses cpu time used over wall time as a percentage of all cores (0–100),
// so it reads on the same scale as BusyPercent.
func ShareOfMachine(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return 100 * cpu.Seconds() / (wall.Seconds() * float64(runtime.NumCPU()))
}

// PostmasterPID reads the postmaster's process id from the first line of postmaster.pid in
// the data directory. It fails when the server is not local or the file is not readable.
func PostmasterPID(dataDir string) (int, error) {
	raw, err := os.ReadFile(dataDir + "/postmaster.pid")
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// ForeignTicks is the CPU time, in /proc/stat clock ticks, used so far by user-space processes
// that are not part of the benchmark: neither a kernel thread (kthreadd's children) nor a
// descendant of one of roots (the bench process tree, the postmaster). Children that already
// exited are counted through their parent's cutime/cstime, so a build that spawns and reaps
// compilers still shows. The difference of two readings is what others used in between.
func ForeignTicks(roots ...int) (uint64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	type proc struct {
		ppid  int
		ticks uint64
	}
	procs := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		t, ppid, err := procTicks(pid)
		if err != nil {
			continue
		}
		procs[pid] = proc{ppid, t}
	}
	ours := map[int]bool{2: true} // kthreadd: the kernel's own threads descend from it
	for _, r := range roots {
		if r > 0 {
			ours[r] = true
		}
	}
	// excluded walks up the parent chain; process trees are shallow, so no memo is needed.
	excluded := func(pid int) bool {
		for range 64 {
			if ours[pid] {
				return true
			}
			p, ok := procs[pid]
			if !ok || p.ppid <= 1 {
				return false
			}
			pid = p.ppid
		}
		return false
	}
	var total uint64
	for pid, p := range procs {
		if !excluded(pid) {
			total += p.ticks
		}
	}
	return total, nil
}

// PostgresTicks is the CPU time, in the same clock ticks as /proc/stat, used so far by a
// PostgreSQL server: the postmaster, every live child (backends, walwriter, checkpointer,
// autovacuum...), and every child that has already exited, whose time the kernel adds to the
// postmaster's cutime/cstime when it is reaped. The difference of two readings is therefore
// the server's CPU over the interval, even when backends come and go inside it.
func PostgresTicks(postmaster int) (uint64, error) {
	total, _, err := procTicks(postmaster)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue
		}
		t, ppid, err := procTicks(pid)
		if err != nil || ppid != postmaster {
			continue // gone meanwhile, or not a server process
		}
		total += t
	}
	return total, nil
}

// ProcTicks is the CPU time, in /proc/stat clock ticks, used so far by one process (with the
// children it reaped).
func ProcTicks(pid int) (uint64, error) {
	t, _, err := procTicks(pid)
	return t, err
}

// procTicks returns utime+stime+cutime+cstime and the parent pid from /proc/PID/stat.
func procTicks(pid int) (uint64, int, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may contain spaces; fields are counted
	// from the last ')'.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ppid, _ := strconv.Atoi(f[1])
	var t uint64
	for _, v := range f[11:15] {
		n, _ := strconv.ParseUint(v, 10, 64)
		t += n
	}
	return t, ppid, nil
}

// TicksShare expresses ticks used between two /proc/stat readings as a share of all cores.
func TicksShare(ticks uint64, a, b CPUTimes) float64 {
	if b.Total <= a.Total {
		return 0
	}
	return 100 * float64(ticks) / float64(b.Total-a.Total)
}
