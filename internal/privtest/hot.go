package privtest

import (
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
)

// LoadHotEntry loads hot_entry from object, bpf/profile/hot.c as bpf2go
// builds it (profile/hot_bpfel_test.o): a socket filter with BTF line
// info whose time goes to one line, marked HOT, of its subprogram spin.
// Profile tests name that line.
func LoadHotEntry(object string) (*ebpf.Program, error) {
	spec, err := ebpf.LoadCollectionSpec(object)
	if err != nil {
		return nil, err
	}
	var objs struct {
		HotEntry *ebpf.Program `ebpf:"hot_entry"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, err
	}
	return objs.HotEntry, nil
}

// SpinUntil runs prog in a loop on a locked OS thread until the returned
// stop is called, 50 runs per BPF_PROG_TEST_RUN call: on a VM where a
// system call costs microseconds, one run per call left the program a
// tenth of the thread's time and profile windows too few samples. Exact
// run counts are not kept (bpf_stats counts what ran), so the retry after
// an interrupted batch that Run avoids does no harm.
func SpinUntil(tb testing.TB, prog *ebpf.Program) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: 50}); err != nil {
				tb.Error(err)
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
