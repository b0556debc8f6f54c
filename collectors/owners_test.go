package collectors

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestOwnersFixture(t *testing.T) {
	got, err := Owners("testdata/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32][]Owner{
		42: {{PID: 100, Comm: "agent"}, {PID: 200, Comm: "loader"}},
		43: {{PID: 100, Comm: "agent"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Owners(testdata/proc) = %v, want %v", got, want)
	}
}

func TestOwnersMissingRoot(t *testing.T) {
	if _, err := Owners("testdata/no-such-proc"); err == nil {
		t.Error("Owners of a missing proc root: no error")
	}
}

func TestOwnersSelf(t *testing.T) {
	privtest.Root(t)
	_, held := loadSocketFilter(t, "own")
	// A program held only through a link.
	rawtp := loadProg(t, ebpf.RawTracepoint, ebpf.AttachNone, 0)
	viaLink := progID(t, rawtp)
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sched_switch", Program: rawtp})
	if err != nil {
		t.Fatalf("attach raw tracepoint: %v", err)
	}
	defer l.Close()
	rawtp.Close()

	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	me := Owner{PID: os.Getpid(), Comm: strings.TrimSpace(string(comm)), Cgroup: CgroupPath(string(cg))}
	me.Unit, me.Container = UnitAndContainer(me.Cgroup)
	owners, err := Owners("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{held, viaLink} {
		if n := slices.IndexFunc(owners[id], func(o Owner) bool { return o.PID == me.PID }); n < 0 || owners[id][n] != me {
			t.Errorf("owners of program %d = %v, want %v among them", id, owners[id], me)
		}
	}
}
