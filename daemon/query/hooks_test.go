package query

import (
	"testing"

	"github.com/bpfperf/bpfperf/collectors"
)

// TestFiresAt: each hook the profile names is charged to the programs
// attached where it fires, and to no other; a trampoline to the tracing
// programs on its function only.
func TestFiresAt(t *testing.T) {
	tp := collectors.AttachPoint{Type: "perf_event", Target: "tracepoint sys_enter_getppid"}
	fentry := collectors.AttachPoint{Type: "tracing", Target: "fentry __do_sys_getppid"}
	fexit := collectors.AttachPoint{Type: "tracing", Target: "fexit __do_sys_getppid"}
	onProg := collectors.AttachPoint{Type: "tracing", Target: "fentry prog 42"}
	for _, c := range []struct {
		hook   string
		attach collectors.AttachPoint
		want   bool
	}{
		{"syscall_enter", tp, true},
		{"syscall_exit", tp, false},
		{"trampoline:__do_sys_getppid", fentry, true},
		{"trampoline:__do_sys_getppid", fexit, true},
		{"trampoline:__do_sys_getpid", fentry, false},
		{"trampoline:__do_sys_getppid", tp, false},
		{"trampoline:42", onProg, false},
		{"syscall_enter", fentry, false},
		{"stats_clock", fentry, true},
	} {
		if got := firesAt(c.hook, []collectors.AttachPoint{c.attach}); got != c.want {
			t.Errorf("firesAt(%q, %+v) = %v, want %v", c.hook, c.attach, got, c.want)
		}
	}
}
