package cgroupid_test

import (
	"testing"

	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestPathOfNewCgroup: a cgroup made just after a walk (within
// MinRewalk, when no walk may run) is named at once, through its file
// handle; the oracle is the path the test made it at.
func TestPathOfNewCgroup(t *testing.T) {
	a := privtest.MakeCgroup(t, "a.service")
	r, err := cgroupid.New("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := r.Path(a.ID); !ok || p != a.Path {
		t.Fatalf("Path(%d) = %q, %v; want %q", a.ID, p, ok, a.Path)
	}
	b := privtest.MakeCgroup(t, "x.slice/b.service") // after the walk
	if p, ok := r.Path(b.ID); !ok || p != b.Path {
		t.Errorf("Path(%d) of a cgroup made after the walk = %q, %v; want %q", b.ID, p, ok, b.Path)
	}
	if _, ok := r.Path(1 << 60); ok {
		t.Error("an id no cgroup has was named")
	}
}
