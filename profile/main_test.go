package profile

import (
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestMain fails the package when a test leaks a perf event or a BPF
// object's file descriptor.
func TestMain(m *testing.M) {
	privtest.HelperMain()
	if os.Getenv(workloadEnv) != "" {
		runWorkload()
	}
	os.Exit(privtest.RunCheckingLeaks(m))
}

// spinner runs a program through BPF_PROG_TEST_RUN in a loop on one locked
// OS thread, as a busy workload.
type spinner struct {
	tid  int
	stop chan struct{}
	done sync.WaitGroup
	runs int
	err  error
}

// spin starts running prog in a loop; Stop ends it. It returns once the
// loop runs.
func spin(tb testing.TB, prog *ebpf.Program) *spinner {
	tb.Helper()
	s := &spinner{stop: make(chan struct{})}
	started := make(chan struct{})
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		s.tid = unix.Gettid()
		close(started)
		in := make([]byte, 14)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			if _, err := prog.Run(&ebpf.RunOptions{Data: in, Repeat: 50}); err != nil {
				s.err = err
				return
			}
			s.runs += 50
		}
	}()
	<-started
	tb.Cleanup(s.Stop)
	return s
}

// Stop ends the loop and waits for it; it may be called more than once.
func (s *spinner) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.done.Wait()
}

func (s *spinner) check(tb testing.TB) {
	tb.Helper()
	s.Stop()
	if s.err != nil {
		tb.Fatalf("workload: %v", s.err)
	}
	if s.runs == 0 {
		tb.Fatal("workload never ran")
	}
}
