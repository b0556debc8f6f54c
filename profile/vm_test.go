package profile

import (
	"io/fs"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestProfileInVM runs the capture tests in the test VM booted with 16
// CPUs: most of them idle, as on a production host, where an idle CPU's
// cpu-clock timer may not fire at all (a 16-CPU machine once failed
// TestCaptureCounts for it). The host runs them at its own count. The
// BPF sources go along: profiles name their lines. TestTriggersByCgroup
// runs there on cgroup2 mounted alone, on a kernel whose samples name the
// root cgroup whatever the task's (the decoder reads /proc then).
func TestProfileInVM(t *testing.T) {
	cfg := vmtest.Config{CPUs: 16, Memory: "2G", Timeout: 4 * time.Minute, Files: bpfSources(t)}
	vmtest.RunTests(t, cfg, []string{"TestHotProgram", "TestCaptureCounts", "TestTailCallChain", "TestUnloadedMidCapture", "TestTriggersByCgroup", "TestTriggersPerfEventV1"})
}

// bpfSources are the BPF sources profiles name their lines in, as
// initramfs files.
func bpfSources(t *testing.T) []vmtest.File {
	src, err := vmtest.DirFiles("../bpf/profile", "bpf/profile")
	if err != nil {
		t.Fatal(err)
	}
	return append([]vmtest.File{{Name: "bpf", Mode: fs.ModeDir | 0o755}}, src...)
}

// TestPMUInVM runs the tests that need a PMU in the arm64 VM under icount
// (QEMU's emulated PMUv3: cycles and instructions sample there).
func TestPMUInVM(t *testing.T) {
	vmtest.RunTests(t, vmtest.Config{Arch: vmtest.ARM64, Exact: true, Files: bpfSources(t)}, []string{"TestCycles", "TestTailCallChainCycles", "TestHardwareEvents"})
}

// TestKernelsInVM runs, on Debian's 6.1 and 6.12, the kernel filter's
// tests (that a perf_event program returning 0 keeps the sample out of the
// ring there too, and what the filter lets through) and TestProbeHooks
// (kprobes, kretprobes, which 6.1 returns through the rethook, and
// kprobe_multi, fprobe): one boot of each kernel for both, not two (each
// boot cost 10-15 s of CI).
func TestKernelsInVM(t *testing.T) {
	tests := []string{"TestFilterAgrees", "TestFilterIdle", "TestFilterRefused", "TestFilterOffUnderTracing", "TestProbeHooks"}
	for _, series := range []*vmtest.Series{vmtest.Kernel61, vmtest.Kernel612} {
		t.Run(series.Name, func(t *testing.T) {
			vmtest.RunTests(t, vmtest.Config{Series: series, CPUs: 2, Memory: "2G", Timeout: 4 * time.Minute, Files: bpfSources(t)}, tests)
		})
	}
}
