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
	src, err := vmtest.DirFiles("../bpf/profile", "bpf/profile")
	if err != nil {
		t.Fatal(err)
	}
	cfg := vmtest.Config{CPUs: 16, Memory: "2G", Timeout: 4 * time.Minute, Files: append([]vmtest.File{{Name: "bpf", Mode: fs.ModeDir | 0o755}}, src...)}
	vmtest.RunTests(t, cfg, []string{"TestHotProgram", "TestCaptureCounts", "TestTailCallChain", "TestUnloadedMidCapture", "TestTriggersByCgroup"})
}
