package daemon_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/btfprog"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestCountersStatusReasons: status lists each mechanism as available or
// with the exact reason the kernel gave, and the daemon runs either way.
// On our hosts: tracing programs refused (EPERM), no PMU (ENOENT). With a
// PMU (the arm64 VM, TestCountersPMUInVM) the events it counts are
// available and those QEMU's PMU does not count are "not supported by
// this PMU" per event, in status and in the table: llc-misses, and
// instructions too outside icount (QEMU counts instructions retired only
// under -icount).
func TestCountersStatusReasons(t *testing.T) {
	privtest.Root(t)
	support := collectors.ProbeCounters()
	d := startDaemon(t, t.TempDir())
	var st api.Status
	eventually(t, "counters in status", func() bool { return d.query(&st, "status") == nil && st.Counters != nil })
	c := st.Counters

	if support.Exact == nil {
		if !c.Exact.Available {
			t.Errorf("exact: %+v, but the probe says available", c.Exact)
		}
	} else {
		want := "tracing programs refused ("
		if !errors.Is(support.Exact, collectors.ErrTracingRefused) {
			want = ""
		}
		if c.Exact.Available || !strings.HasPrefix(c.Exact.Reason, want) || !strings.HasSuffix(c.Exact.Reason, ")") {
			t.Errorf("exact: %+v; want unavailable, reason %q...", c.Exact, want)
		}
		t.Logf("exact: %s (%s)", c.Exact.Reason, c.Exact.Detail)
	}
	if len(c.Sampled) != 4 {
		t.Fatalf("sampled: %+v, want cpu-clock, cycles, instructions, llc-misses", c.Sampled)
	}
	if s := c.Sampled[0]; s.Event != "cpu-clock" || !s.Available {
		t.Errorf("sampled cpu-clock: %+v, want available", s)
	}
	for _, s := range c.Sampled[1:] {
		if support.PMU != nil && (s.Available || s.Reason != "no PMU (ENOENT)") {
			t.Errorf("sampled %s: %+v, want unavailable: no PMU (ENOENT)", s.Event, s)
		}
	}
	// QEMU's PMU, judged apart from the daemon: the arm64 VM.
	qemuPMU := vmtest.InVM() && runtime.GOARCH == "arm64"
	if qemuPMU {
		const why = "not supported by this PMU (ENOENT)"
		unsupported := map[string]string{"llc-misses": why}
		counted := []string{"cpu-clock", "cycles", "instructions"}
		if _, exact := vmtest.ICount(); !exact {
			unsupported["instructions"] = why
			counted = counted[:2]
		}
		for _, s := range c.Sampled[1:] {
			if want := unsupported[s.Event] == ""; s.Available != want || (!want && s.Reason != why) {
				t.Errorf("sampled %s: %+v; want %s for %v, the others available", s.Event, s, why, slices.Sorted(maps.Keys(unsupported)))
			}
		}
		if !maps.Equal(c.Unsupported, unsupported) {
			t.Errorf("unsupported %v, want %v", c.Unsupported, unsupported)
		}
		if !c.Exact.Available || !slices.Equal(c.Events, counted) {
			t.Errorf("exact %+v counts %v, want %v", c.Exact, c.Events, counted)
		}
	} else if len(c.Unsupported) != 0 {
		t.Errorf("unsupported %v where the probe found none", c.Unsupported)
	}
	if support.Exact != nil && len(c.Events) != 0 {
		t.Errorf("events %v listed for an exact mechanism that cannot run", c.Events)
	}

	// The table says the same in one line per mechanism.
	out := d.cli(t, "counters", "list")
	for _, want := range []string{"counters exact:", "counters sampled cpu-clock:", "available", "no targets"} {
		if !strings.Contains(out, want) {
			t.Errorf("counters list lacks %q:\n%s", want, out)
		}
	}
	if support.PMU != nil && !regexp.MustCompile(`counters sampled cycles: +unavailable: no PMU \(ENOENT\)`).MatchString(out) {
		t.Errorf("counters list does not say cycles need a PMU:\n%s", out)
	}
	if qemuPMU && !regexp.MustCompile(`counters exact: +available .*; llc-misses: not supported by this PMU \(ENOENT\)`).MatchString(out) {
		t.Errorf("counters list does not say llc-misses is not supported by this PMU:\n%s", out)
	}
	// Still running and sampling.
	before := st.LastSample
	eventually(t, "another sample", func() bool { return d.query(&st, "status") == nil && st.LastSample.After(before) })
}

// TestCountersRefusedHere: where the kernel refuses tracing programs,
// `counters enable` fails with one line naming the reason, the program's
// counter numbers are absent (not zero), and the daemon goes on.
func TestCountersRefusedHere(t *testing.T) {
	privtest.Root(t)
	if collectors.ProbeCounters().Exact == nil {
		t.Skip("this kernel allows fentry/fexit; the refusal is seen on the host only")
	}
	d := startDaemon(t, t.TempDir(), "--counters.programs", "e2e_ctr*")
	name := uniqueName("e2e_ctr")
	prog := loadBTFTarget(t, name, 10)
	waitShown(t, d, name)
	stdout, stderr, code := run(bin.cli, "--socket", d.socket, "counters", "enable", name)
	oneLineError(t, "counters enable on this host", stdout, stderr, code, "exact perf counters unavailable: tracing programs refused (EPERM)")

	// The glob matched it too: listed as failed, with the reason.
	var l api.CountersList
	eventually(t, "the glob's target to be listed", func() bool {
		return d.query(&l, "counters", "list") == nil && len(l.Targets) == 1
	})
	if tg := l.Targets[0]; tg.Name != name || tg.State != "failed" || tg.Reason != "tracing programs refused (EPERM)" || tg.Last != nil {
		t.Errorf("target %+v, want %s failed: tracing programs refused (EPERM)", tg, name)
	}
	if err := privtest.Run(prog, 10); err != nil {
		t.Fatal(err)
	}
	// Absent, not zero: the JSON has no counter keys at all.
	out := d.cli(t, "show", name, "-o", "json")
	for _, k := range []string{"cycles_per_run", "instructions_per_run", "ipc", "llc_misses_per_run", "perf_counters"} {
		if strings.Contains(out, `"`+k+`"`) {
			t.Errorf("show -o json has %q for a program that cannot be counted:\n%s", k, out)
		}
	}
	d.cli(t, "status")
}

// TestCountersBadInput: unknown programs, bad windows and flags get one
// line and a non-zero exit, from the CLI and from bpfperfd.
func TestCountersBadInput(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir())
	name := uniqueName("e2e_cbad")
	p, err := privtest.LoadSocketFilter(name)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitShown(t, d, name)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"counters", "enable", "no_such_prog_xyz"}, `unknown program "no_such_prog_xyz"`},
		{[]string{"counters", "disable", "no_such_prog_xyz"}, `unknown program "no_such_prog_xyz"`},
		{[]string{"counters", "enable"}, "missing PROG"},
		{[]string{"counters", "enable", "--window", "1ms", name}, `--window "1ms"`},
		{[]string{"counters", "enable", "--window", "soon", name}, `--window "soon"`},
		{[]string{"counters", "enable", "--window", "2h", name}, `--window "2h"`},
		{[]string{"counters", "disable", name}, "is not being counted"},
		{[]string{"counters", "history", name, "--since", "1h", "--until", "2h"}, "is not after --since"},
		{[]string{"counters", "list", "extra"}, "unexpected argument"},
		{[]string{"counters", "list", "-o", "yaml"}, `-o "yaml"`},
		{[]string{"latency", "no_such_prog_xyz"}, `unknown program "no_such_prog_xyz"`},
		{[]string{"latency"}, "missing PROG"},
		{[]string{"latency", "--duration", "1ms", name}, "duration 1ms is outside 100ms..10m0s"},
		{[]string{"latency", "--duration", "soon", name}, "soon"},
		{[]string{"latency", "-o", "yaml", name}, `-o "yaml"`},
		{[]string{"history", name, "--latency", "--since", "1h", "--until", "2h"}, "is not after --since"},
	} {
		stdout, stderr, code := run(bin.cli, append([]string{"--socket", d.socket}, c.args...)...)
		oneLineError(t, "bpfperf "+strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}

	dir := t.TempDir()
	sock := dir + "/x.sock"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--counters.window", "1ms"}, "--counters.window 1ms is outside"},
		{[]string{"--counters.window", "-5s"}, "--counters.window"},
		{[]string{"--counters.window", "fast"}, "counters.window"},
		{[]string{"--counters.window", "10s", "--counters.every", "5s"}, "--counters.every 5s must be between"},
		{[]string{"--counters.every", "48h"}, "--counters.every 48h0m0s must be between"},
		{[]string{"--counters.max", "65"}, "--counters.max 65 is outside 1..64"},
		{[]string{"--counters.max", "-1"}, "--counters.max -1"},
		{[]string{"--counters.programs", "xdp["}, `--counters.programs "xdp["`},
		{[]string{"--latency.window", "11m"}, "--latency.window 11m0s is outside 100ms..10m0s"},
		{[]string{"--latency.window", "10s", "--latency.every", "5s"}, "--latency.every 5s must be between"},
		{[]string{"--latency.max", "17"}, "--latency.max 17 is outside 1..16"},
		{[]string{"--latency.programs", "xdp["}, `--latency.programs "xdp["`},
		{[]string{"--latency.event", "cycels"}, `--latency.event: perf event "cycels": want one of cpu-clock, cycles`},
	} {
		stdout, stderr, code := run(bin.daemon, append([]string{"--state-dir", dir, "--socket", sock}, c.args...)...)
		oneLineError(t, "bpfperfd "+strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}
}

// loadBTFTarget loads a socket filter named name, with BTF (which fentry
// needs), that spins iters times per run. The test holds its only fd.
func loadBTFTarget(t *testing.T, name string, iters int32) *ebpf.Program {
	t.Helper()
	prog, err := btfprog.Load(name, asm.Instructions{
		asm.Mov.Imm(asm.R1, iters),
		asm.Sub.Imm(asm.R1, 1).WithSymbol("loop"),
		asm.JNE.Imm(asm.R1, 0, "loop"),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	})
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

// TestCountersPMUInVM runs the counter tests that need a PMU in the arm64
// VM (QEMU's emulated PMUv3, Linux's armv8_pmuv3 driver), with bpfperfd
// and bpfperf built for it. 4 minutes: the four take 50 s with the boot
// on a quiet host, and ran past the default 2 with the host's load at 9
// (2026-11-27).
func TestCountersPMUInVM(t *testing.T) {
	vmtest.RunTestsWithCommands(t, vmtest.Config{Arch: vmtest.ARM64, Exact: true, Timeout: 4 * time.Minute}, []string{"../cmd/bpfperfd", "../cmd/bpfperf"},
		[]string{"TestCountersStatusReasons", "TestProfileEvent", "TestLatencyEndToEnd", "TestBenchCounters"})
}

// TestCountersExactEndToEnd runs the real daemon and CLI in the VM: a
// target enabled with a short window has every run counted once, the
// numbers reach list, show and history with their mechanism, and once the
// window ends the daemon holds nothing. A second window stops early when
// the target's owner lets it go, and the limit on targets holds.
func TestCountersExactEndToEnd(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs fentry/fexit: runs in the VM (TestDaemonInVM)")
	}
	privtest.Root(t)
	start := time.Now()
	d := startDaemon(t, t.TempDir(), "--counters.window", "4s", "--counters.every", "1h", "--counters.max", "1")
	var st api.Status
	d.json(t, &st, "status")
	if st.Counters == nil || !st.Counters.Exact.Available || len(st.Counters.Events) == 0 {
		t.Fatalf("status counters = %+v, want exact available", st.Counters)
	}

	name := uniqueName("vm_ctr")
	target := loadBTFTarget(t, name, 200)
	info, _ := target.Info()
	id, _ := info.ID()
	waitShown(t, d, name)

	var tg api.CounterTarget
	d.json(t, &tg, "counters", "enable", name)
	if tg.State != "counting" || tg.ID != uint32(id) || tg.Source != "enabled" {
		t.Fatalf("enable: %+v, want counting id %d", tg, id)
	}
	const runs = 300
	if err := privtest.Run(target, runs); err != nil {
		t.Fatal(err)
	}

	// The window ends by itself after 4 s.
	var l api.CountersList
	eventually(t, "the window to end", func() bool {
		return d.query(&l, "counters", "list") == nil && len(l.Targets) == 1 && l.Targets[0].Windows == 1
	})
	last := l.Targets[0].Last
	if last == nil || last.Mechanism != "exact" || last.CountedRuns != runs || last.Entries != runs || last.Stopped != string(collectors.StopEnded) {
		t.Fatalf("last window %+v, want exact, %d runs counted, ended", last, runs)
	}
	if last.CPUClockNsPerRun == nil || *last.CPUClockNsPerRun <= 0 {
		t.Errorf("cpu-clock per run %v, want > 0", last.CPUClockNsPerRun)
	}
	if last.CyclesPerRun != nil || last.IPC != nil {
		t.Errorf("cycles/IPC present without a PMU: %+v", last)
	}
	var shown api.ProgDetail
	d.json(t, &shown, "show", name)
	t.Logf("window: %d runs, cpu-clock %.0f ns/run, events %v; bpf_stats avg %.0f ns/run (fentry/fexit included)", last.CountedRuns, *last.CPUClockNsPerRun, last.Events, *shown.AvgNsSinceLoad)

	t.Logf("$ bpfperf counters list\n%s", d.cli(t, "counters", "list"))

	// show: the row carries the figures and their mechanism.
	out := d.cli(t, "show", name, "-o", "json")
	var row map[string]any
	if err := json.Unmarshal([]byte(out), &row); err != nil {
		t.Fatal(err)
	}
	if _, ok := row["cycles_per_run"]; ok {
		t.Errorf("show has cycles_per_run without a PMU:\n%s", out)
	}
	if _, has := reflect.TypeOf(api.ProgRow{}).FieldByName("PerfCounters"); has {
		pc, _ := row["perf_counters"].(map[string]any)
		if pc == nil || pc["mechanism"] != "exact" || pc["counted_runs"] != float64(runs) || pc["cpu_clock_ns_per_run"] == nil {
			t.Errorf("show perf_counters = %v, want exact, %d runs, cpu-clock per run", row["perf_counters"], runs)
		}
	} else {
		t.Log("ProgRow has no PerfCounters field yet: show does not carry the counters")
	}

	// history: one window, the same runs.
	var h []api.CounterHistoryPoint
	d.json(t, &h, "counters", "history", name)
	if len(h) != 1 || h[0].CountedRuns != runs || h[0].CPUClockNsPerRun == nil || h[0].ID != uint32(id) {
		t.Errorf("history = %+v, want one window of %d runs", h, runs)
	}

	t.Logf("$ bpfperf counters history %s\n%s", name, d.cli(t, "counters", "history", name))

	// Between windows the daemon holds nothing of the target.
	if n := fdsHeldBetweenTicks(t, d.cmd.Process.Pid); n != 0 {
		t.Errorf("daemon holds %d program or link fds between windows", n)
	}
	waitNoCountingPrograms(t)

	// The limit: one target at a time here.
	other := uniqueName("vm_ctr2")
	loadBTFTarget(t, other, 10)
	waitShown(t, d, other)
	stdout, stderr, code := run(bin.cli, "--socket", d.socket, "counters", "enable", other)
	oneLineError(t, "enable over the limit", stdout, stderr, code, "too many counter targets")
	// No BTF, no fentry.
	d.cli(t, "counters", "disable", name)
	nobtf := uniqueName("vm_nobtf")
	p, err := privtest.LoadSocketFilter(nobtf)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitShown(t, d, nobtf)
	stdout, stderr, code = run(bin.cli, "--socket", d.socket, "counters", "enable", nobtf)
	oneLineError(t, "enable without BTF", stdout, stderr, code, "target has no BTF")

	// A long window stops early when the owner lets the target go, and
	// the target is then gone from the kernel: the daemon kept nothing.
	d.json(t, &tg, "counters", "enable", "--window", "10m", name)
	if err := privtest.Run(target, 5); err != nil {
		t.Fatal(err)
	}
	target.Close()
	eventually(t, "the target to be dropped after its owner let go", func() bool {
		return d.query(&l, "counters", "list") == nil && len(l.Targets) == 0
	})
	eventually(t, "the target to be unloaded", func() bool {
		samples, err := collectors.Sweep(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			if s.ID == uint32(id) {
				return false
			}
		}
		return true
	})
	waitNoCountingPrograms(t)
	// The early window was stored too: two windows in the history.
	d.json(t, &h, "counters", "history", fmt.Sprint(id))
	if len(h) != 2 || h[1].CountedRuns != 5 || h[1].Stopped != "" {
		t.Errorf("history after release = %+v, want 2 windows, the second of 5 runs", h)
	}
	t.Logf("end-to-end in the VM took %s", time.Since(start).Round(time.Millisecond))
}

// waitShown waits until the daemon knows the program called name.
func waitShown(t *testing.T, d *daemonProc, name string) {
	t.Helper()
	eventually(t, "the daemon to see "+name, func() bool {
		var p api.ProgDetail
		return d.query(&p, "show", name) == nil
	})
}

// waitNoCountingPrograms waits until no counters_entry/counters_exit
// program is loaded.
func waitNoCountingPrograms(t *testing.T) {
	t.Helper()
	waitNoProgramsNamed(t, "counters_entry", "counters_exit")
}

// waitNoProgramsNamed waits until no program of these names is loaded.
func waitNoProgramsNamed(t *testing.T, names ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("no %v left loaded", names), func() bool {
		samples, err := collectors.Sweep(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			if slices.Contains(names, s.Name) {
				return false
			}
		}
		return true
	})
}

// hostTools are the host's binaries of tools (and the libraries they
// need) for the test VM; a tool not installed skips the test.
func hostTools(t *testing.T, tools ...string) []vmtest.File {
	t.Helper()
	var files []vmtest.File
	for _, tool := range tools {
		path, err := exec.LookPath(tool)
		if err != nil {
			privtest.Skip(t, tool+" not installed (apt-get install libbpf-tools bpftool)")
		}
		fs, err := vmtest.HostBinary(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	return files
}
