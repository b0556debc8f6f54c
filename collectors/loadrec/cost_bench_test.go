package loadrec

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// BenchmarkJoinCost prints what the follower's tracepoints (sys_enter_bpf
// and sys_exit_bpf) add to system calls host-wide: a syscall tracepoint
// puts every task's system calls on the kernel's traced path while it is
// attached, and every bpf(2) call runs both programs. Measured as the
// median of 11 alternated pairs of 200,000 getppid(2) calls and of 20,000
// bpf(2) calls (an invalid command, refused at once) with the follower
// open with and without its tracepoints (the tracepoints even where the
// fentry program would attach, which runs on loads only).
func BenchmarkJoinCost(b *testing.B) {
	privtest.Root(b)
	privtest.Tracefs(b)
	getppid := func() float64 {
		start := time.Now()
		for range 200_000 {
			syscall.Getppid()
		}
		return float64(time.Since(start)) / 200_000
	}
	bpfCall := func() float64 {
		start := time.Now()
		for range 20_000 {
			unix.Syscall(unix.SYS_BPF, 1<<20, 0, 0)
		}
		return float64(time.Since(start)) / 20_000
	}
	open := func(tracepoint bool) *Follower {
		f, err := Open(Config{noTracepoint: !tracepoint, noFentry: true})
		if err != nil {
			b.Fatal(err)
		}
		if tracepoint && f.JoinErr() != nil {
			b.Fatal(f.JoinErr())
		}
		return f
	}
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	for range b.N {
		var gOff, gOn, bOff, bOn []float64
		for range 11 {
			for _, tp := range []bool{false, true} {
				f := open(tp)
				g, c := getppid(), bpfCall()
				f.Close()
				if tp {
					gOn, bOn = append(gOn, g), append(bOn, c)
				} else {
					gOff, bOff = append(gOff, g), append(bOff, c)
				}
			}
		}
		g0, g1, c0, c1 := median(gOff), median(gOn), median(bOff), median(bOn)
		fmt.Printf("loaders' tracepoints: getppid(2) %.0f -> %.0f ns (+%.0f ns on every system call of every task), bpf(2) %.0f -> %.0f ns (+%.0f ns)\n",
			g0, g1, g1-g0, c0, c1, c1-c0)
		b.ReportMetric(g1-g0, "added-ns/syscall")
		b.ReportMetric(c1-c0, "added-ns/bpf-call")
	}
}
