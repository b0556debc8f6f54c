package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func countersCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "counters",
		Usage: "per-program perf counters: which mechanisms work here, what is counted, enable/disable targets",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "show each mechanism (available, or why not) and every target with its last window",
				Flags: []cli.Flag{outputFlag},
				Action: func(c *cli.Context) error {
					if err := checkOutput(c); err != nil {
						return err
					}
					if err := noArgs(c); err != nil {
						return err
					}
					client, err := dial(c)
					if err != nil {
						return err
					}
					l, err := client.Counters()
					if err != nil {
						return err
					}
					if c.String("output") == "table" {
						for _, p := range countersStatusKV(&l.Status) {
							fmt.Printf("%-31s %s\n", p[0]+":", p[1])
						}
						if len(l.Targets) == 0 {
							fmt.Println("\nno targets: bpfperf counters enable PROG, or bpfperfd --counters.programs GLOB")
							return nil
						}
						fmt.Println()
					}
					return render(c, os.Stdout, l, counterTargetsTable(l.Targets))
				},
			},
			{
				Name:      "enable",
				Usage:     "count PROG with the exact mechanism, one window every --counters.every",
				ArgsUsage: "PROG (an id, a name when unique, name@tag, or an identity)",
				Flags: []cli.Flag{
					outputFlag,
					&cli.StringFlag{Name: "window", Usage: "how long each window counts (100ms to 1h); default the daemon's --counters.window"},
				},
				Action: targetAction(dial, "enable"),
			},
			{
				Name:      "disable",
				Usage:     "stop counting PROG (an open window is closed and its counts stored)",
				ArgsUsage: "PROG (an id, a name when unique, name@tag, or an identity)",
				Flags:     []cli.Flag{outputFlag},
				Action:    targetAction(dial, "disable"),
			},
			{
				Name:      "history",
				Usage:     "per-run counters of PROG, one line per counting window",
				ArgsUsage: "PROG (an id, a name, name@tag, or an identity)",
				Flags:     append([]cli.Flag{outputFlag}, timeRangeFlags("1h")...),
				Action: func(c *cli.Context) error {
					if err := checkOutput(c); err != nil {
						return err
					}
					prog, err := oneArg(c, "PROG")
					if err != nil {
						return err
					}
					client, since, until, err := dialRange(c, dial)
					if err != nil {
						return err
					}
					return countersHistory(c, client, prog, since, until)
				},
			},
		},
	}
}

// targetAction runs `counters enable|disable PROG`.
func targetAction(dial clientFactory, verb string) cli.ActionFunc {
	return func(c *cli.Context) error {
		if err := checkOutput(c); err != nil {
			return err
		}
		prog, err := oneArg(c, "PROG")
		if err != nil {
			return err
		}
		var window time.Duration
		if v := c.String("window"); v != "" {
			if window, err = time.ParseDuration(v); err != nil || window < 100*time.Millisecond || window > time.Hour {
				return fmt.Errorf("--window %q is not a duration from 100ms to 1h", v)
			}
		}
		client, err := dial(c)
		if err != nil {
			return err
		}
		var t api.CounterTarget
		if verb == "enable" {
			t, err = client.CountersEnable(prog, window)
		} else {
			t, err = client.CountersDisable(prog)
		}
		if err != nil {
			return fmt.Errorf("counters %s %s: %w", verb, prog, err)
		}
		return renderTarget(c, t)
	}
}

// countersHistory prints the counting windows of prog. `history
// --counters` calls it too.
func countersHistory(c *cli.Context, client *api.Client, prog string, since, until time.Time) error {
	h, err := client.CountersHistory(prog, since, until)
	if err != nil {
		return err
	}
	t := table{
		header: append([]string{"WINDOW END", "ID"}, perRunHeader...),
		fields: append([]string{"window_end", "id"}, perRunFields...),
	}
	for _, p := range h.Points {
		id := strconv.FormatUint(uint64(p.ID), 10)
		t.rows = append(t.rows, append([]string{p.WindowEnd.Local().Format("2006-01-02 15:04:05.000"), id}, perRunCells(&p.PerfCounters)...))
		t.raw = append(t.raw, append([]string{p.WindowEnd.UTC().Format(time.RFC3339Nano), id}, perRunRaw(&p.PerfCounters)...))
	}
	return render(c, os.Stdout, h.Points, t)
}

// progsCounters renders `progs --counters`: every program with its per-run
// counters and the mechanism behind them (the newer of its exact and
// sampled windows, as the daemon fills the row).
func progsCounters(c *cli.Context, client *api.Client, rows []api.ProgRow) error {
	t := table{
		header: append([]string{"ID", "TYPE", "NAME", "SAMPLED CPU%"}, perRunHeader...),
		fields: append([]string{"id", "type", "name", "sampled_cpu_percent"}, perRunFields...),
	}
	for _, r := range rows {
		id := strconv.FormatUint(uint64(r.ID), 10)
		pc := r.PerfCounters
		t.rows = append(t.rows, append([]string{id, r.Type, r.Name, fmtPercent(r.SampledCPUPercent)}, perRunCells(pc)...))
		t.raw = append(t.raw, append([]string{id, r.Type, r.Name, raw(r.SampledCPUPercent)}, perRunRaw(pc)...))
	}
	return render(c, os.Stdout, rows, t)
}

var (
	perRunHeader = []string{"MECHANISM", "COUNTED", "SAMPLES", "CPU-CLOCK", "CPU-CLOCK/RUN", "CYCLES/RUN", "INSNS/RUN", "IPC", "LLC-MISS/RUN", "LLC-MISS/1K-INSNS"}
	perRunFields = []string{"mechanism", "counted_runs", "samples", "cpu_clock_ns", "cpu_clock_ns_per_run", "cycles_per_run", "instructions_per_run", "ipc", "llc_misses_per_run", "llc_misses_per_1k_instructions"}
)

func perRunCells(pc *api.PerfCounters) []string {
	if pc == nil {
		return []string{"-", "-", "-", "-", "-", "-", "-", "-", "-", "-"}
	}
	return []string{pc.Mechanism, fmtCount(pc.CountedRuns), fmtSamples(pc), fmtNs(sampledNs(pc)), fmtNs(pc.CPUClockNsPerRun), fmtRate(pc.CyclesPerRun), fmtRate(pc.InstructionsPerRun), fmtFixed(pc.IPC, 2), fmtRate(pc.LLCMissesPerRun), fmtFixed(pc.LLCMissesPer1kInstructions, 2)}
}

func perRunRaw(pc *api.PerfCounters) []string {
	if pc == nil {
		return make([]string, len(perRunFields))
	}
	return []string{pc.Mechanism, fmtCount(pc.CountedRuns), rawSamples(pc), raw(sampledNs(pc)), raw(pc.CPUClockNsPerRun), raw(pc.CyclesPerRun), raw(pc.InstructionsPerRun), raw(pc.IPC), raw(pc.LLCMissesPerRun), raw(pc.LLCMissesPer1kInstructions)}
}

// sampledNs is a sampled window's estimated cpu-clock ns, nil for exact
// windows (which give per-run figures only).
func sampledNs(pc *api.PerfCounters) *float64 {
	if v, ok := pc.Totals["cpu-clock"]; ok && pc.Mechanism == api.MechanismSampled {
		return &v
	}
	return nil
}

func fmtSamples(pc *api.PerfCounters) string {
	if pc.Mechanism != api.MechanismSampled {
		return "-"
	}
	return fmtCount(pc.Samples)
}

func rawSamples(pc *api.PerfCounters) string {
	if pc.Mechanism != api.MechanismSampled {
		return ""
	}
	return fmtCount(pc.Samples)
}

func fmtFixed(f *float64, prec int) string {
	if f == nil {
		return "-"
	}
	return strconv.FormatFloat(*f, 'f', prec, 64)
}

// showCountersKV is the perf counters part of `show`: the last window's
// per-run figures and the mechanism, or why there are none.
func showCountersKV(pc *api.PerfCounters) [][2]string {
	if pc == nil {
		return [][2]string{{"counters", "- (no recent window: bpfperf counters enable PROG, or no samples landed in it)"}}
	}
	window := fmt.Sprintf("%s .. %s (%s)", fmtTime(pc.WindowStart), fmtTime(pc.WindowEnd), pc.WindowEnd.Sub(pc.WindowStart).Round(time.Millisecond))
	if pc.Stopped != "" {
		window += ", " + pc.Stopped
	}
	kv := [][2]string{
		{"counters", pc.Mechanism + " (" + strings.Join(pc.Events, ", ") + ")"},
		{"counters window", window},
		{"counted runs", fmtCount(pc.CountedRuns)},
	}
	if pc.Mechanism == api.MechanismSampled {
		ns := fmtNs(sampledNs(pc))
		if pc.CountedRuns == 0 {
			ns += " (no runs counted: per-run figures absent; a tail-call target's runs are the entry program's)"
		}
		kv = append(kv, [2]string{"samples", fmtCount(pc.Samples)}, [2]string{"cpu-clock in window", ns})
	}
	return append(kv, [][2]string{
		{"cpu-clock/run", fmtNs(pc.CPUClockNsPerRun)},
		{"cycles/run", fmtRate(pc.CyclesPerRun)},
		{"instructions/run", fmtRate(pc.InstructionsPerRun)},
		{"ipc", fmtFixed(pc.IPC, 2)},
		{"llc misses/run", fmtRate(pc.LLCMissesPerRun)},
		{"llc misses/1k insns", fmtFixed(pc.LLCMissesPer1kInstructions, 2)},
	}...)
}

// samplingFigures is a sampled event's latest window as status shows it:
// the rate in force, samples, and losses, throttling and multiplexing
// where there were any.
func samplingFigures(m api.MechanismStatus) string {
	if m.Hz == 0 {
		return ""
	}
	s := fmt.Sprintf("; %d Hz, last window %d samples", m.Hz, m.Samples)
	if m.Lost > 0 {
		s += fmt.Sprintf(", %d lost", m.Lost)
	}
	if m.Throttled > 0 {
		s += fmt.Sprintf(", throttled %d times", m.Throttled)
	}
	if m.RunningShare != nil {
		s += fmt.Sprintf(", on the PMU %.0f%% (multiplexed; scaled)", 100**m.RunningShare)
	}
	return s
}

// countersStatusKV is the perf counters part of `status`.
func countersStatusKV(s *api.CountersStatus) [][2]string {
	if s == nil {
		return [][2]string{{"counters", "not started"}}
	}
	avail := func(m api.MechanismStatus) string {
		if !m.Available {
			return "unavailable: " + m.Reason
		}
		s := "available"
		if len(m.Produces) > 0 {
			s += " (" + strings.Join(m.Produces, ", ") + ")"
		}
		return s + samplingFigures(m)
	}
	exact := avail(s.Exact)
	if s.Exact.Available {
		exact += " (" + strings.Join(s.Events, ", ") + ")"
	}
	for _, e := range slices.Sorted(maps.Keys(s.Unsupported)) {
		exact += "; " + e + ": " + s.Unsupported[e]
	}
	kv := [][2]string{{"counters exact", exact}}
	for _, m := range s.Sampled {
		kv = append(kv, [2]string{"counters sampled " + m.Event, avail(m)})
	}
	targets := fmt.Sprintf("%d of %d (%d counting now", s.Targets, s.Max, s.Counting)
	if s.Waiting > 0 {
		targets += fmt.Sprintf(", %d waiting", s.Waiting)
	}
	if s.Failed > 0 {
		targets += fmt.Sprintf(", %d failed", s.Failed)
	}
	targets += fmt.Sprintf("), window %s every %s", time.Duration(s.WindowMs)*time.Millisecond, time.Duration(s.EveryMs)*time.Millisecond)
	kv = append(kv, [2]string{"counters targets", targets})
	if len(s.Programs) > 0 {
		kv = append(kv, [2]string{"counters programs", strings.Join(s.Programs, " ")})
	}
	return kv
}

func counterTargetsTable(ts []api.CounterTarget) table {
	t := table{
		header: append([]string{"ID", "NAME", "SOURCE", "STATE", "WINDOWS"}, perRunHeader...),
		fields: append([]string{"id", "name", "source", "state", "windows"}, perRunFields...),
	}
	for _, x := range ts {
		state := x.State
		if x.Reason != "" {
			state += ": " + x.Reason
		}
		id := strconv.FormatUint(uint64(x.ID), 10)
		t.rows = append(t.rows, append([]string{id, x.Name, x.Source, state, strconv.Itoa(x.Windows)}, perRunCells(x.Last)...))
		t.raw = append(t.raw, append([]string{id, x.Name, x.Source, state, strconv.Itoa(x.Windows)}, perRunRaw(x.Last)...))
	}
	return t
}

func renderTarget(c *cli.Context, t api.CounterTarget) error {
	if c.String("output") == "table" {
		fmt.Printf("%s %d (%s): %s, window %s\n", t.Name, t.ID, t.Source, t.State, time.Duration(t.WindowMs)*time.Millisecond)
		return nil
	}
	return render(c, os.Stdout, t, counterTargetsTable([]api.CounterTarget{t}))
}
