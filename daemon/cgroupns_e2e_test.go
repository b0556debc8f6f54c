package daemon_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestCgroupNamespaceHostPaths: bpfperfd in a cgroup namespace of its own,
// as containerd runs every container on a cgroup v2 node (the DaemonSet's
// pod included), names a holder's cgroup as the host does. The oracle is
// the holder's /proc cgroup file read by this test, in the host's
// namespace. Without the translation the daemon shows
// "/../system.slice/...", a path that exists nowhere.
func TestCgroupNamespaceHostPaths(t *testing.T) {
	privtest.Root(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		privtest.Skip(t, "no unshare (util-linux)")
	}
	pod := privtest.MakeCgroup(t, "kubepods.slice/bpfperfd-pod.scope")
	svc := privtest.MakeCgroup(t, "system.slice/bpfperf-cgns.service")
	d := startDaemonIn(t, pod, []string{"unshare", "--cgroup"}, t.TempDir())

	// The daemon is in a namespace of its own, rooted at its cgroup.
	mine, _ := os.Readlink("/proc/self/ns/cgroup")
	its, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/cgroup", d.cmd.Process.Pid))
	if err != nil || its == mine {
		t.Fatalf("bpfperfd's cgroup namespace %q (%v), the test's %q: want one of its own", its, err, mine)
	}
	if own := readProcCgroup(t, d.cmd.Process.Pid); own != pod.Path {
		t.Fatalf("bpfperfd runs in %q, want %q", own, pod.Path)
	}

	holder := svc.LoadBurst(t, uniqueName("cgns"), 1)
	host := readProcCgroup(t, holder.PID)
	if host != svc.Path {
		t.Fatalf("the holder's cgroup reads %q from the host's namespace, want %q", host, svc.Path)
	}
	id := strconv.FormatUint(uint64(holder.IDs[0]), 10)
	var show api.ProgDetail
	eventually(t, "the holder named", func() bool {
		return d.query(&show, "show", id) == nil && len(show.Meta.Owners) > 0 && show.Meta.Owners[0].PID == holder.PID
	})
	o := show.Meta.Owners[0]
	if o.Cgroup != host || o.Unit != "bpfperf-cgns.service" {
		t.Errorf("holder cgroup %q unit %q, want %q and bpfperf-cgns.service", o.Cgroup, o.Unit, host)
	}
	if lo := show.Meta.Loader; lo == nil || lo.Cgroup != host || lo.CgroupID != svc.ID {
		t.Errorf("loader %+v, want cgroup %q (id %d)", lo, host, svc.ID)
	}
	if out := d.cli(t, "owners"); !strings.Contains(out, "bpfperf-cgns.service") {
		t.Errorf("owners does not name the unit:\n%s", out)
	}
}

// readProcCgroup is pid's cgroup v2 path as this process reads it.
func readProcCgroup(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("no cgroup v2 line in /proc/%d/cgroup", pid)
	return ""
}
