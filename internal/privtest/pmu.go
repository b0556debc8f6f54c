package privtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PMU skips the test unless the machine has a hardware PMU: it opens a
// cycles counter (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES) on the
// calling thread, as the code under test does, and closes it.
//
// A missing PMU is hardware absent, not a privilege missing, so this skip
// does not fail under BPFPERF_REQUIRE_PRIVILEGED=1: CI hosts and the test
// VMs have no PMU, and tests that need one would otherwise never pass there.
// So that the skip cannot hide a broken probe, it is taken only when the
// kernel answered ENOENT or ENODEV (its "no such event source" for
// hardware events) and sysfs agrees that no core PMU is registered (see
// CorePMUs); when the two disagree the test fails. A refusal for lack of
// privilege (EACCES, EPERM) goes through Skip and fails in CI; any other
// answer (EBUSY, EINVAL, ...) means a PMU exists and refused, and fails.
// Call it after Root.
func PMU(tb testing.TB) {
	tb.Helper()
	if reason := NoPMU(tb); reason != "" {
		tb.Skipf("needs a hardware PMU: %s", reason)
	}
}

// NoPMU says why the machine has no hardware PMU, or "" when it has one,
// judged as PMU judges it; it fails the test where the probe and sysfs
// disagree. Tests that check the refusal where there is no PMU skip with
// t.Skip when this is "".
func NoPMU(tb testing.TB) string {
	tb.Helper()
	skip, err := pmuVerdict(probeCycles(), "/sys")
	switch {
	case err != nil:
		tb.Fatal(err)
	case skip != nil && !errors.Is(skip, errNoPMU):
		Skip(tb, skip.Error())
	case skip != nil:
		return skip.Error()
	}
	return ""
}

var errNoPMU = errors.New("no hardware PMU")

// pmuVerdict judges the cycles probe's answer, cross-checked with the
// event sources registered under sysfs (a fixture tree in tests). skip is
// nil when a PMU counts, wraps errNoPMU when there is none, or says which
// privilege is missing; err is set when the probe and sysfs disagree or
// the kernel refused for another reason.
func pmuVerdict(probe error, sysfs string) (skip, err error) {
	var errno unix.Errno
	switch {
	case probe == nil:
		return nil, nil
	case !errors.As(probe, &errno):
		return nil, fmt.Errorf("cycles probe: %w", probe)
	case errno == unix.EACCES || errno == unix.EPERM:
		return fmt.Errorf("perf_event_open cycles: %w (needs CAP_PERFMON)", errno), nil
	case errno != unix.ENOENT && errno != unix.ENODEV:
		return nil, fmt.Errorf("perf_event_open cycles: %w (%s): a PMU seems to exist but refused the probe", errno, unix.ErrnoName(errno))
	}
	pmus, serr := CorePMUs(sysfs)
	if serr != nil {
		return nil, fmt.Errorf("cycles probe says no PMU (%s), and sysfs cannot confirm it: %w", unix.ErrnoName(errno), serr)
	}
	if len(pmus) > 0 {
		return nil, fmt.Errorf("cycles probe says no PMU (%s), but sysfs lists core PMUs %v: the probe is broken", unix.ErrnoName(errno), pmus)
	}
	return fmt.Errorf("%w: perf_event_open cycles: %s, and %s lists no core PMU", errNoPMU, unix.ErrnoName(errno), filepath.Join(sysfs, eventSources)), nil
}

const eventSources = "bus/event_source/devices"

// CorePMUs lists the CPU PMUs registered under sysfs's event sources: the
// one named cpu (x86), cpu_core and cpu_atom (hybrid x86), armv8_pmu*
// and arm_* cores (arm64), and any source of type PERF_TYPE_RAW, the type
// the first core PMU registers under. A machine without a PMU has only
// software, tracepoint, breakpoint and the like (here: breakpoint, msr,
// software, tracepoint, uprobe).
func CorePMUs(sysfs string) ([]string, error) {
	dir := filepath.Join(sysfs, eventSources)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s is empty: not a sysfs", dir)
	}
	var pmus []string
	for _, e := range entries {
		name := e.Name()
		typ, _ := os.ReadFile(filepath.Join(dir, name, "type"))
		switch {
		case name == "cpu", name == "cpu_core", name == "cpu_atom",
			strings.HasPrefix(name, "armv8_"), strings.HasPrefix(name, "arm_cortex"),
			strings.TrimSpace(string(typ)) == fmt.Sprint(unix.PERF_TYPE_RAW):
			pmus = append(pmus, name)
		}
	}
	return pmus, nil
}

// probeCycles opens and closes a disabled kernel-mode cycles counter on the
// calling thread, with a raw perf_event_open: independent of the code
// under test (internal/perfevent), whose tests use this package.
func probeCycles() error {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_HARDWARE,
		Config: unix.PERF_COUNT_HW_CPU_CYCLES,
		Bits:   unix.PerfBitDisabled | unix.PerfBitExcludeUser | unix.PerfBitExcludeHv,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}
