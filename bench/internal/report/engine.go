package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ultimat3/jobs/bench/internal/record"
	"github.com/ultimat3/jobs/bench/systems"
)

// Sections 5 and 6 measure our engine alone: the peers have no counterpart of replay.Check, and
// timer lag is asked of our engine, not compared.

// lagTarget is the p99 timer lag we aim for, in milliseconds.
const lagTarget = 50.0

var (
	perEvent = func(pick func(record.Sample) float64) func(record.Sample) float64 {
		return func(s record.Sample) float64 {
			if s.Events == 0 {
				return math.NaN()
			}
			return pick(s) / float64(s.Events)
		}
	}
	allocB   = perEvent(func(s record.Sample) float64 { return float64(s.AllocBytes) })
	allocN   = perEvent(func(s record.Sample) float64 { return float64(s.Allocs) })
	wallMs   = func(s record.Sample) float64 { return s.Seconds * 1000 }
	readMs   = func(s record.Sample) float64 { return s.HistoryRead * 1000 }
	nsPerEvt = func(s record.Sample) float64 { return 1e9 / s.Rate }
)

// ourGroups is the groups of a scenario for our systems, in key order, and whether any sample of
// the scenario exists.
func ourGroups(samples []record.Sample, keys []string, scen string, sub func(record.Sample) string) (map[string]*group, []string) {
	m, order := groups(samples, scen, sub)
	var ours []string
	for _, k := range order {
		if systems.IsOurs(m[k].key) {
			ours = append(ours, k)
		}
	}
	return m, ours
}

// notRun says why a section of ours has no rows.
func notRun(w func(string, ...any), in Info, keys []string) {
	ran := false
	for _, k := range keys {
		ran = ran || systems.IsOurs(k)
	}
	if ran {
		w("_Not measured in this run (see BENCH_SCENARIOS)._\n\n")
	} else {
		w("_Not run: none of our systems was in this run (BENCH_SYSTEMS)._\n\n")
	}
}

// failedRow prints a row for a group with no good run.
func failedRow(w func(string, ...any), name string, g *group, cols int) {
	why := "n/a: " + g.skip
	if g.skip == "" {
		why = fmt.Sprintf("**failed** (%d of %d runs; see Failures)", len(g.failed), g.attempts)
	}
	w("| %s | %s%s\n", name, why, strings.Repeat(" | —", cols-2)+" |")
}

func renderReplay(w func(string, ...any), samples []record.Sample, keys []string, in Info) {
	w("## 5. Replay: long histories\n\n")
	w("A run that resumes anywhere but on the worker that holds it parked (after a crash, a deploy, an eviction, a retry) is rebuilt by replaying its history: the body runs from the top and every durable call it makes gets its recorded outcome back. ")
	w("Here the body calls `jobs.Step` N times and the history is RunStarted followed by N StepCompleted events (each the encoded output of a no-op step). Our engine only: the peers are not measured here.\n\n")

	m, order := ourGroups(samples, keys, systems.ScenarioReplay, func(s record.Sample) string { return strconv.Itoa(s.N) })
	if len(order) == 0 {
		w("**In memory: `replay.Check`.** ")
		notRun(w, in, keys)
	} else {
		w("**In memory: `replay.Check`.** The history is built in memory, replayed once untimed, then replayed again and again for at least a second and at least three passes. ")
		w("B/event and allocs/event are the process's heap allocations over the timed passes (runtime.MemStats deltas, as `go test -benchmem` takes them) divided by the events replayed. No store is involved, so there is one row per history length.\n\n")
		w("| events in the history | events/s | ns/event | B/event | allocs/event | passes | CPU (bench/pg/other) |\n")
		w("|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, k := range order {
			g := m[k]
			n := strings.TrimPrefix(k, g.key+"|")
			if len(g.ok) == 0 {
				failedRow(w, n, g, 7)
				continue
			}
			w("| %s | %s | %s | %s | %s | %s | %s |\n", n, rateCell(g), num(g.med(nsPerEvt), 0),
				num(g.med(allocB), 0), num(g.med(allocN), 2),
				num(g.med(func(s record.Sample) float64 { return float64(s.Events) / float64(max(s.Units, 1)) }), 0), cpuCell(g))
		}
		w("\n")
	}

	m, order = ourGroups(samples, keys, systems.ScenarioResume, nil)
	if len(order) == 0 {
		w("**From the store: resume.** ")
		notRun(w, in, keys)
		return
	}
	w("**From the store: resume.** A run whose history holds %d StepCompleted events is written through the store API (RunCreate, RunClaim under a worker id of the harness, RunApply of the events in batches of 5000, then a RunApply that hands the run back ready), outside the timed window. ", in.ResumeEvents)
	w("The clock then starts a fresh worker (in the process of the already running engine; concurrency 1, nothing parked) and stops when the run's completion is acknowledged: it covers the claim, reading the whole history (`HistoryRead`), replaying it, and the completion commit. ")
	w("events/s is the events over that time; \"reading history\" is the part spent in the history read (timed at the worker's frontend); B/event and allocs/event are the whole process's allocations over the window (the database driver's decoding included) divided by the events. ")
	w("Each run checks that the body got every recorded step back and ran none live.\n\n")
	w("| system | backend | events | resume (ms) | events/s | reading history (ms) | B/event | allocs/event | CPU (bench/pg/other) |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range order {
		g := m[k]
		name := "**" + g.label + "**"
		if len(g.ok) == 0 {
			failedRow(w, name, g, 9)
			continue
		}
		w("| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", name, g.backend, g.ok[0].N, spreadCell(g, wallMs, 0),
			num(g.med(rate), 0), num(g.med(readMs), 0), num(g.med(allocB), 0), num(g.med(allocN), 2), cpuCell(g))
	}
	w("\n")
}

func renderTimers(w func(string, ...any), samples []record.Sample, keys []string, in Info) {
	w("## 6. Timer lag\n\n")
	m, order := ourGroups(samples, keys, systems.ScenarioTimers, nil)
	if len(order) == 0 {
		w("How late durable timers fire: many runs sleep until due times packed into one window, and each wake-up's lateness is measured. ")
		notRun(w, in, keys)
		return
	}
	spacing := "—"
	if in.Timers > 0 {
		spacing = num(float64(in.TimerWindow.Milliseconds())/float64(in.Timers), 2)
	}
	w("%d runs each sleep once (`jobs.Sleep`) until a due time of their own: run i is due at T0 + i × %s ms, so all the wake-ups fall due within one %s window, T0 being %s after the first enqueue. ",
		in.Timers, spacing, in.TimerWindow, in.TimerLead)
	w("Every run must be asleep before T0 (a run fails otherwise), so the window measures firing alone. ")
	w("After the sleep the body runs a step that notes `time.Now()` when it starts; a timer's lag is that moment minus the wake-up time its sleep recorded (read off the sleep command the worker sent the engine, so it is the due time the timer service worked to). ")
	w("Real clock; one engine and one worker (%d in flight, every sleeping run kept parked) in the bench process; the CPU window opens 0.1 s before T0 and closes when the last run has completed. ", in.Concurrency)
	w("Percentiles are nearest-rank over the %d timers of a run, then the median over runs; max shows the worst run's in brackets. The target is p99 < %.0f ms.\n\n", in.Timers, lagTarget)
	w("| system | backend | p50 (ms) | p95 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | p99 < %.0f ms | CPU (bench/pg/other) | all asleep after (s) | least slack (ms) |\n", lagTarget)
	w("|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|\n")
	lag := func(pick func(*record.Lag) float64) func(record.Sample) float64 {
		return func(s record.Sample) float64 {
			if s.Lag == nil {
				return math.NaN()
			}
			return pick(s.Lag)
		}
	}
	for _, k := range order {
		g := m[k]
		name := "**" + g.label + "**"
		if len(g.ok) == 0 {
			failedRow(w, name, g, 11)
			continue
		}
		p99 := g.med(lag(func(l *record.Lag) float64 { return l.P99 }))
		meets := "yes"
		if math.IsNaN(p99) || p99 >= lagTarget {
			meets = "**no**"
		}
		maxCell := num(g.med(lag(func(l *record.Lag) float64 { return l.Max })), 1)
		if len(g.ok) > 1 {
			worst := math.Inf(-1)
			for _, s := range g.ok {
				if s.Lag != nil {
					worst = max(worst, s.Lag.Max)
				}
			}
			maxCell += " (" + num(worst, 1) + ")"
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, g.backend,
			num(g.med(lag(func(l *record.Lag) float64 { return l.P50 })), 1),
			num(g.med(lag(func(l *record.Lag) float64 { return l.P95 })), 1),
			spreadCell(g, lag(func(l *record.Lag) float64 { return l.P99 }), 1),
			num(g.med(lag(func(l *record.Lag) float64 { return l.P999 })), 1),
			maxCell, meets, cpuCell(g),
			num(g.med(lag(func(l *record.Lag) float64 { return l.ArmS })), 1),
			num(g.med(lag(func(l *record.Lag) float64 { return l.SlackMs })), 0))
	}
	// Where in the window the lag grew: a backlog rises tenth by tenth, a burst stands out in
	// one tenth (saved runs from before the breakdown existed have none, and show no table).
	tenths := false
	for _, k := range order {
		for _, s := range m[k].ok {
			tenths = tenths || (s.Lag != nil && len(s.Lag.Tenths) == 10)
		}
	}
	if tenths {
		w("\np99 (ms) of each tenth of the window, earliest due times first (median over runs):\n\n")
		w("| system | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, k := range order {
			g := m[k]
			if len(g.ok) == 0 {
				continue
			}
			row := "| " + g.label + " |"
			for i := range 10 {
				row += " " + num(g.med(lag(func(l *record.Lag) float64 {
					if len(l.Tenths) != 10 {
						return math.NaN()
					}
					return l.Tenths[i]
				})), 1) + " |"
			}
			w("%s\n", row)
		}
	}
	w("\n\"All asleep after\" is how long the runs took from the first enqueue until every one had recorded its sleep; \"least slack\" the least time any had left before its due time when it did (both outside the measured window). No Postgres counters are shown for sections 5 and 6: the arming (or the writing of the long history) goes through the pool the timed part then uses, and Postgres backends flush their statistics lazily, so the window would be charged with it.\n\n")
}

// spreadCell is the median of f with its range over runs when there was more than one.
func spreadCell(g *group, f func(record.Sample) float64, prec int) string {
	c := num(g.med(f), prec)
	if len(g.ok) >= 2 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range g.ok {
			if v := f(s); !math.IsNaN(v) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		c += fmt.Sprintf(" (%s–%s)", num(lo, prec), num(hi, prec))
	}
	if g.dropped > 0 {
		c += fmt.Sprintf(" [%d disturbed run(s) left out]", g.dropped)
	}
	return c
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, "/")
}

// engineLine adds the figures of the engine-only scenarios to a progress line.
func engineLine(s record.Sample) string {
	var b strings.Builder
	if s.Events > 0 {
		fmt.Fprintf(&b, ", %d events replayed, %.0f B/event, %.2f allocs/event", s.Events,
			float64(s.AllocBytes)/float64(s.Events), float64(s.Allocs)/float64(s.Events))
		if s.HistoryRead > 0 {
			fmt.Fprintf(&b, ", history read %.0f ms", s.HistoryRead*1000)
		}
	}
	if l := s.Lag; l != nil {
		fmt.Fprintf(&b, ", lag ms p50 %.1f p95 %.1f p99 %.1f max %.1f (all asleep after %.1f s, least slack %.0f ms)",
			l.P50, l.P95, l.P99, l.Max, l.ArmS, l.SlackMs)
	}
	return b.String()
}
