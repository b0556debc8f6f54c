package daemon_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/node"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestPodmanNames (issue 43): where no Kubernetes runs, a program loaded
// and held by a process in a rootful Podman container is named by the
// container's name, as `podman inspect` gives it: its identity is `...
// by container NAME`, and owners names the container. The container
// removed and run again under the same name (a new id): the same
// identity, no new_version. A container that makes the program run is
// named by its name in triggers.
func TestPodmanNames(t *testing.T) {
	privtest.Root(t)
	privtest.Tracefs(t)
	if _, err := exec.LookPath("podman"); err != nil {
		privtest.Skip(t, "podman not installed (apt-get install podman)")
	}
	img := podmanLoaderImage(t)
	tp := node.TracepointID(t, "syscalls", "sys_enter_getppid")
	d := startDaemon(t, t.TempDir(), "--profile.every", "2s", "--profile.hz", "999", "--cri.socket", "none")
	name := uniqueName("pmld")
	ctr := "web-" + name
	want := "tracepoint/" + name + " at perf_event tracepoint sys_enter_getppid by container " + ctr
	seen := map[uint32]bool{}

	var first, running api.ProgDetail
	for i, what := range []string{"first container", "the container removed and run again"} {
		id, pid := podmanRun(t, ctr, img, name, "100", tp)
		detail := settledIdentity(t, d, newProg(t, d, name, seen))
		t.Logf("%s (podman id %s, pid %d): program %d, %s", what, id[:12], pid, detail.ID, detail.Identity)
		running = detail
		if detail.Identity != want {
			t.Errorf("%s: identity %q, want %q", what, detail.Identity, want)
		}
		if lo := detail.Meta.Loader; lo == nil || lo.PID != pid || lo.Container != ctr || !strings.Contains(lo.Cgroup, id) {
			t.Errorf("%s: loader %+v, want pid %d in container %s (cgroup of id %s)", what, lo, pid, ctr, id)
		}
		owner := "tploader[" + strconv.Itoa(pid) + "]"
		eventually(t, "owners to name the container of "+owner, func() bool {
			var o api.Owners
			if d.query(&o, "owners") != nil {
				return false
			}
			i := slices.IndexFunc(o.Owners, func(r api.OwnerRow) bool { return r.Owner == owner })
			return i >= 0 && o.Owners[i].Container == ctr
		})
		if i == 0 {
			first = detail
			if out, err := exec.Command("podman", "rm", "-f", "-t", "1", ctr).CombinedOutput(); err != nil {
				t.Fatalf("podman rm: %v\n%s", err, out)
			}
		} else if detail.IdentityID != first.IdentityID {
			t.Errorf("the container run again: identity %s, want %s", detail.IdentityID, first.IdentityID)
		}
	}
	if nv := newVersionsOf(t, d, name); len(nv) != 0 {
		t.Errorf("new_version events %+v, want none", nv)
	}

	// Another container calls getppid(2) for 3 s: the program's trigger
	// row of its cgroup names it.
	drv := "drv-" + name
	drvID, _ := podmanRun(t, drv, img, "drive", "3")
	prog := strconv.Itoa(int(running.ID))
	var row api.TriggerRow
	eventuallyWithin(t, 20*time.Second, "triggers to show the driver container's cgroup", func() bool {
		var tr api.Triggers
		if d.query(&tr, "triggers", prog) != nil {
			return false
		}
		i := slices.IndexFunc(tr.Rows, func(r api.TriggerRow) bool { return strings.Contains(r.Cgroup, drvID) })
		if i >= 0 {
			row = tr.Rows[i]
		}
		return i >= 0
	})
	if row.Workload != drv || row.Container != drv {
		t.Errorf("the driver's trigger row: workload %q, container %q; want %s (cgroup %s)", row.Workload, row.Container, drv, row.Cgroup)
	}
	var only api.Triggers
	d.json(t, &only, "triggers", prog, "--workload", drv)
	if len(only.Rows) != 1 || !strings.Contains(only.Rows[0].Cgroup, drvID) {
		t.Errorf("triggers --workload %s: %+v, want the driver's row alone", drv, only.Rows)
	}
	t.Logf("triggers:\n%s", d.cli(t, "triggers", prog))
}

// podmanRun runs tploader with args in a podman container named ctr,
// removed when the test ends, and returns its id and pid as podman
// inspect gives them. The ulimits: podman asks for 1048576 open files and
// processes, which root without CAP_SYS_RESOURCE (this host's) may not
// set.
func podmanRun(t *testing.T, ctr, img string, args ...string) (id string, pid int) {
	t.Helper()
	out, err := exec.Command("podman", append([]string{"run", "-d", "--name", ctr, "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
		"--cap-add", "BPF,PERFMON,SYS_ADMIN", img}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rm", "-f", "-t", "1", ctr).Run() })
	out, err = exec.Command("podman", "inspect", ctr).Output()
	if err != nil {
		t.Fatalf("podman inspect %s: %v", ctr, err)
	}
	var insp []struct {
		ID    string `json:"Id"`
		Name  string `json:"Name"`
		State struct{ Pid int }
	}
	if err := json.Unmarshal(out, &insp); err != nil || len(insp) != 1 || insp[0].Name != ctr {
		t.Fatalf("podman inspect %s: %v %+v", ctr, err, insp)
	}
	return insp[0].ID, insp[0].State.Pid
}

// podmanLoaderImage builds tploader static and imports it as an image of
// its own (nothing can be pulled here), removed when the test ends.
func podmanLoaderImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "tploader"), "github.com/bpfperf/bpfperf/internal/node/tploader")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build tploader: %v\n%s", err, out)
	}
	if out, err := exec.Command("tar", "-C", dir, "-cf", filepath.Join(dir, "img.tar"), "tploader").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	ref := fmt.Sprintf("localhost/bpfperf-test-tploader:%d", os.Getpid())
	if out, err := exec.Command("podman", "import", "--change", `ENTRYPOINT ["/tploader"]`, filepath.Join(dir, "img.tar"), ref).CombinedOutput(); err != nil {
		t.Fatalf("podman import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", ref).Run() })
	return ref
}
