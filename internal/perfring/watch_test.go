package perfring

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// commRing opens a dummy event on the calling thread that writes a
// PERF_RECORD_COMM each time the thread is renamed, and wakes its
// watchers at each record (a watermark of one byte): a producer whose
// every record the test makes and counts itself.
func commRing(t *testing.T) *Ring {
	t.Helper()
	attr := &unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_DUMMY,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:   unix.PerfBitComm | unix.PerfBitWatermark,
		Wakeup: 1, // wakeup_watermark, in bytes
	}
	fd, err := unix.PerfEventOpen(attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		privtest.Skip(t, fmt.Sprintf("open a dummy perf event: %v", err))
	}
	r, err := Map(fd, -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestWatcherSaysEveryWakeUp renames the thread in bursts of one to
// seven, while another goroutine reads the ring each time the watcher
// says Ready and at no other time (the profiler while no timer is
// armed), and waits after each burst until that reader has seen its last
// record. Renames land before, during and after the reader's drains and
// its return to waiting: a reader told of every record sees them all; a
// wake-up lost at the last record of a burst stalls it for good.
func TestWatcherSaysEveryWakeUp(t *testing.T) {
	if os.Geteuid() != 0 {
		privtest.Skip(t, "needs root")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := commRing(t)
	w, err := Watch([]*Ring{r})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	seen := make(chan string, 64)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-w.Ready():
			case <-stop:
				return
			}
			r.Read(func(typ uint32, data []byte) {
				if typ == unix.PERF_RECORD_COMM && len(data) > 8 {
					name, _, _ := strings.Cut(string(data[8:]), "\x00")
					seen <- name
				}
			})
		}
	}()

	const bursts = 1000
	renames := 0
	for b := range bursts {
		var last string
		for range 1 + b%7 {
			last = fmt.Sprintf("watch-%d", renames)
			p, _ := unix.BytePtrFromString(last)
			if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0); err != nil {
				t.Fatal(err)
			}
			renames++
		}
		for got := ""; got != last; {
			select {
			case got = <-seen:
			case <-time.After(time.Second):
				// Not polled here: a poll would take the wake-up.
				t.Fatalf("burst %d of %d: %s not read in 1 s; the ring holds %d bytes unread", b+1, bursts, last, r.Pending())
			}
		}
	}
}
