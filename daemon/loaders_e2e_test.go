package daemon_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/profile"
)

// pinnedLinkProg is the id of the program a pinned link holds (bpftool).
func pinnedLinkProg(t *testing.T, pin string) uint32 {
	t.Helper()
	out, errOut, code := run("bpftool", "link", "show", "pinned", pin, "-j")
	var l struct {
		ProgID uint32 `json:"prog_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || l.ProgID == 0 {
		t.Fatalf("bpftool link show pinned %s: %s %s", pin, out, errOut)
	}
	return l.ProgID
}

// settledIdentity waits for program id's identity and returns its detail.
func settledIdentity(t *testing.T, d *daemonProc, id uint32) api.ProgDetail {
	t.Helper()
	var p api.ProgDetail
	eventuallyFor(t, 20*time.Second, "program "+strconv.Itoa(int(id))+"'s identity", func() bool {
		return d.query(&p, "show", strconv.Itoa(int(id))) == nil && p.Identity != ""
	})
	return p
}

// TestUnitLoaderAttachesLate (issue 41): a loader in a
// system.slice/NAME.service cgroup loads a tracepoint program, attaches
// it 3 s later, pins the link and exits; the unit is restarted with a
// changed program. Both versions are `tracepoint/NAME at perf_event
// tracepoint sys_enter_getppid by unit NAME.service` (the identity waited
// for the attach point; the loader's unit, not the pin, is the runner),
// with exactly one new_version; show names the loader and its pid after
// it exited, as the kernel's load record and the test's own exec saw it.
func TestUnitLoaderAttachesLate(t *testing.T) {
	privtest.Root(t)
	needBpftool(t)
	privtest.Tracefs(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "0")
	unit := "bpfperf-late" + strconv.Itoa(os.Getpid()) + ".service"
	cg := privtest.MakeCgroup(t, "system.slice/"+unit)
	name := uniqueName("late")
	pin := filepath.Join("/sys/fs/bpf", name)
	want := "tracepoint/" + name + " at perf_event tracepoint sys_enter_getppid by unit " + unit

	var ids []uint32
	for i, turns := range []int32{100, 200} {
		if i > 0 {
			os.Remove(pin) // the unit stops: its program goes with the link
		}
		pid := cg.AttachLate(t, name, turns, pin, 3*time.Second)
		id := pinnedLinkProg(t, pin)
		ids = append(ids, id)
		p := settledIdentity(t, d, id)
		t.Logf("version %d (program %d): %s; loader %+v", i+1, id, p.Identity, p.Meta.Loader)
		if p.Identity != want {
			t.Errorf("version %d: identity %q, want %q", i+1, p.Identity, want)
		}
		if lo := p.Meta.Loader; lo == nil || lo.PID != pid || lo.Unit != unit || lo.Cgroup != cg.Path+"" {
			t.Errorf("version %d: loader %+v, want pid %d in %s (unit %s)", i+1, lo, pid, cg.Path, unit)
		}
		if out := d.cli(t, "show", strconv.Itoa(int(id))); !strings.Contains(out, "("+strconv.Itoa(pid)+") at ") || !strings.Contains(out, "unit "+unit) {
			t.Errorf("show does not name the loader, pid %d in %s:\n%s", pid, unit, out)
		}
	}
	var evs []api.Event
	d.json(t, &evs, "events", "--since", "1h", "--prog", name)
	var versions []api.Event
	for _, e := range evs {
		if e.Kind == "new_version" {
			versions = append(versions, e)
		}
	}
	if len(versions) != 1 || versions[0].ID != ids[1] {
		t.Errorf("new_version events %+v, want one, of program %d", versions, ids[1])
	}
}

// TestIdentitiesSurviveRestart (issue 41): bpfperfd restarted while
// libbpf-tools' execsnoop runs, a program bpftool pinned and left, and one
// a unit's loader attached, pinned and left: every identity is the same
// before and after, although the second daemon saw none of their loads
// (the unit's program would be "by pin" from what holds it now), and each
// identity's history holds points from both daemons.
func TestIdentitiesSurviveRestart(t *testing.T) {
	parallelWaiting(t)
	privtest.Root(t)
	needBpftool(t)
	privtest.Tracefs(t)
	state := t.TempDir()
	d := startDaemon(t, state, "--profile.every", "0")
	snoop := startTool(t, "execsnoop")
	ids := slices.Collect(maps.Values(toolProgs(t, snoop.pid, 2)))
	pinned := loadPinned(t, "pinned_v1_bpfel_test.o", filepath.Join("/sys/fs/bpf", uniqueName("restart")))
	unit := "bpfperf-restart" + strconv.Itoa(os.Getpid()) + ".service"
	name := uniqueName("rst")
	linkPin := filepath.Join("/sys/fs/bpf", name)
	privtest.MakeCgroup(t, "system.slice/"+unit).AttachLate(t, name, 100, linkPin, 0)
	ids = append(ids, pinned.id, pinnedLinkProg(t, linkPin))
	stopExecs := paceWith(t, 20*time.Millisecond, func() error { return exec.Command("/bin/true").Run() })
	defer stopExecs()
	stopGetppid := paceWith(t, 20*time.Millisecond, func() error { syscall.Getppid(); return nil })
	defer stopGetppid()

	before := settledRows(t, d, ids...)
	time.Sleep(time.Second) // points of the first daemon
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, d.stderr)
	}
	stoppedAt := time.Now()
	d = startDaemon(t, state, "--profile.every", "0")
	after := settledRows(t, d, ids...)
	time.Sleep(time.Second) // points of the second
	for _, id := range ids {
		b, a := before[id], after[id]
		t.Logf("program %d: %s / %s", id, b.Identity, a.Identity)
		if a.Identity != b.Identity || a.IdentityID != b.IdentityID {
			t.Errorf("program %d: identity %q before the restart, %q after", id, b.Identity, a.Identity)
		}
		var pts []api.HistoryPoint
		d.json(t, &pts, "history", b.IdentityID, "--since", "5m")
		first, last := time.Time{}, time.Time{}
		if len(pts) > 0 {
			first, last = pts[0].Time, pts[len(pts)-1].Time
		}
		if len(pts) == 0 || !first.Before(stoppedAt) || !last.After(stoppedAt) {
			t.Errorf("history of %s: %d points, %v to %v; want points before and after the restart at %v", b.IdentityID, len(pts), first, last, stoppedAt)
		}
	}
	if want := "by unit " + unit; !strings.HasSuffix(after[ids[len(ids)-1]].Identity, want) {
		t.Errorf("the unit's program after the restart: %q, want it %s", after[ids[len(ids)-1]].Identity, want)
	}
}

// TestIdentityWaitsForFailedLinks (issue 41): while the readings of BPF
// links fail (injected: the first 3, as a link being set up answers
// EAGAIN), a program attached and running is not given an identity
// without the attach point they missed; once a reading succeeds it is. A
// raw tracepoint's link is the only record of where it is attached (no
// perf event, no netlink attachment says it).
func TestIdentityWaitsForFailedLinks(t *testing.T) {
	parallelWaiting(t)
	privtest.Root(t)
	name := uniqueName("lnkf")
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.RawTracepoint, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: prog})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	d := startDaemon(t, t.TempDir(), "--profile.every", "0", "--debug.links-fail-reads", "3")
	p := settledIdentity(t, d, uint32(id))
	want := "raw_tracepoint/" + name + " at raw_tracepoint sys_enter"
	if !strings.HasPrefix(p.Identity, want) {
		t.Errorf("identity %q after failed link readings, want it %q...", p.Identity, want)
	}
}

// TestShortLivedProgramInProfile (issue 41): a program that runs for
// 150 ms and unloads between two of the daemon's sweeps (a 10 s interval)
// and, most times, between two drains of the profile capture, is named in
// the continuous profile: the daemon learned it from its load record, as
// it was loaded.
func TestShortLivedProgramInProfile(t *testing.T) {
	privtest.Root(t)
	privtest.Tracefs(t)
	d := startDaemon(t, t.TempDir(), "--interval", "10s", "--profile.every", "1s", "--profile.duration", "1s")
	eventually(t, "continuous profiling to run", func() bool {
		var st api.Status
		return d.query(&st, "status") == nil && st.Profiling != nil && st.Profiling.StoredProfiles > 0
	})
	since := time.Now()
	name := uniqueName("brief")
	prog, id, tag := loadHot(t, name)
	stop := spinUntil(t, prog)
	time.Sleep(150 * time.Millisecond)
	stop()
	prog.Close()
	time.Sleep(3 * time.Second) // the windows that saw it, stored
	system := fmt.Sprintf("bpf_prog_%s_%s", tag, name)
	var named, windows int
	for _, w := range listProfiles(t, d, "--since", since.Add(-time.Second).Format(time.RFC3339Nano)) {
		if w.Kind != api.ProfileContinuous {
			continue
		}
		windows++
		path := filepath.Join(t.TempDir(), w.ID+".pb.gz")
		d.cli(t, "profile", "get", w.ID, "-o", path)
		p := readProfile(t, path)
		shares, err := profile.ProgramShares(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range p.Function {
			if f.SystemName == system && shares[id] > 0 {
				named++
			}
		}
	}
	if named == 0 {
		t.Errorf("none of %d windows names %s (program %d), which ran 150 ms between two sweeps", windows, system, id)
	}
}

// TestCopiesKeepTheirSlots (issue 41): two copies of a program loaded at
// once that differ in their code (a tool run twice with other options)
// are one identity in two slots; loaded again in the other order, each
// takes back its own slot, so neither history gets the other's code as a
// new version.
func TestCopiesKeepTheirSlots(t *testing.T) {
	parallelWaiting(t)
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "0")
	name := uniqueName("copy")
	load := func(turns int32) (*ebpf.Program, uint32) {
		p, err := privtest.LoadLoop(name, turns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		if err := privtest.Run(p, 10); err != nil {
			t.Fatal(err)
		}
		info, _ := p.Info()
		id, _ := info.ID()
		return p, uint32(id)
	}
	a, idA := load(100)
	b, idB := load(200)
	first := settledRows(t, d, idA, idB)
	a.Close()
	b.Close()
	eventually(t, "both copies to go", func() bool {
		var rows []api.ProgRow
		return d.query(&rows, "progs") == nil && !hasProg(rows, idA, true) && !hasProg(rows, idB, true)
	})
	_, idB2 := load(200) // b's code first this time
	_, idA2 := load(100)
	again := settledRows(t, d, idA2, idB2)
	t.Logf("a: %s then %s; b: %s then %s", first[idA].Identity, again[idA2].Identity, first[idB].Identity, again[idB2].Identity)
	if again[idA2].Identity != first[idA].Identity || again[idB2].Identity != first[idB].Identity || first[idA].Identity == first[idB].Identity {
		t.Errorf("a %q then %q, b %q then %q: want each copy's slot back", first[idA].Identity, again[idA2].Identity, first[idB].Identity, again[idB2].Identity)
	}
	if evs := eventsOf(t, d, "new_version"); slices.ContainsFunc(evs, func(e api.Event) bool { return e.Name == name }) {
		t.Errorf("new_version events %+v, want none of %s", evs, name)
	}
}

// TestLoadRecordsLostInBurst (issue 41): 2,000 programs loaded at once by
// a unit's process while bpfperfd is stopped (SIGSTOP: a daemon
// descheduled through a burst, which overflows its rings as a small ring
// would) lose most of their load records. The daemon notices (status
// counts the records lost) and its sweep mends the rest: every program is
// listed and settles, those whose record arrived with the loader's pid
// and unit, the others with the same unit as their runner from what holds
// them; no more programs lack a loader than records were lost.
func TestLoadRecordsLostInBurst(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "0")
	unit := "bpfperf-burst" + strconv.Itoa(os.Getpid()) + ".service"
	cg := privtest.MakeCgroup(t, "system.slice/"+unit)
	name := uniqueName("burst")
	const n = 2000
	resume := d.pause(t)
	b := cg.LoadBurst(t, name, n)
	resume()
	// The kernel tells a ring's reader of its losses in the next record
	// it writes there: a load on each CPU after the burst.
	time.Sleep(500 * time.Millisecond)
	privtest.LoadOnEachCPU(t)

	var st api.Status
	lostRe := regexp.MustCompile(`(\d+) records lost`)
	eventually(t, "status to count lost load records", func() bool {
		return d.query(&st, "status") == nil && lostRe.MatchString(st.Loaders)
	})
	lost, _ := strconv.Atoi(lostRe.FindStringSubmatch(st.Loaders)[1])

	want := map[uint32]bool{}
	for _, id := range b.IDs {
		want[id] = true
	}
	var rows []api.ProgRow
	var settled int
	eventuallyFor(t, 40*time.Second, fmt.Sprintf("all %d programs listed and settled", n), func() bool {
		if d.query(&rows, "progs") != nil {
			return false
		}
		settled = 0
		for _, r := range rows {
			if want[r.ID] && r.Identity != "" {
				settled++
			}
		}
		return settled == n
	})
	var withLoader, fromHolders int
	for _, r := range rows {
		if !want[r.ID] {
			continue
		}
		if by := " by unit " + unit; !strings.HasSuffix(r.Identity, by) && !strings.Contains(r.Identity, by+" #") {
			t.Errorf("program %d: identity %q, want its runner unit %s", r.ID, r.Identity, unit)
		}
		switch lo := r.Loader; {
		case lo == nil:
			fromHolders++
		case lo.PID == b.PID && lo.Unit == unit:
			withLoader++
		default:
			t.Errorf("program %d: loader %+v, want pid %d in unit %s", r.ID, lo, b.PID, unit)
		}
	}
	t.Logf("%d programs: %d with their loader from its record, %d without (runner from holders); status: %s", n, withLoader, fromHolders, st.Loaders)
	if withLoader == 0 || fromHolders == 0 || fromHolders > lost {
		t.Errorf("%d programs with a loader, %d without, %d records lost: want some of each, and no more without than records lost", withLoader, fromHolders, lost)
	}
}

// TestOneshotUnitLoaderGone (issue 41): a oneshot unit's loader loads and
// attaches a program, pins the link and exits, and its cgroup is removed
// at once, as systemd removes a stopped unit's, all while bpfperfd is
// stopped (SIGSTOP), so that neither the cgroup's id nor /proc names
// anything when the load record is read. The names the sys_enter_bpf
// program kept still give the unit: the runner is the unit, not the pin.
func TestOneshotUnitLoaderGone(t *testing.T) {
	parallelWaiting(t)
	privtest.Root(t)
	privtest.Tracefs(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "0")
	unit := "bpfperf-oneshot" + strconv.Itoa(os.Getpid()) + ".service"
	cg := privtest.MakeCgroup(t, "system.slice/"+unit)
	name := uniqueName("once")
	pin := filepath.Join("/sys/fs/bpf", name)
	resume := d.pause(t)
	pid := cg.AttachLate(t, name, 100, pin, 0)
	cg.Remove(t)
	resume()
	id := pinnedLinkProg(t, pin)
	p := settledIdentity(t, d, id)
	t.Logf("program %d: %s; loader %+v", id, p.Identity, p.Meta.Loader)
	if want := "tracepoint/" + name + " at perf_event tracepoint sys_enter_getppid by unit " + unit; p.Identity != want {
		t.Errorf("identity %q, want %q", p.Identity, want)
	}
	if lo := p.Meta.Loader; lo == nil || lo.PID != pid || lo.Unit != unit {
		t.Errorf("loader %+v, want pid %d in unit %s", lo, pid, unit)
	}
}

// pause stops the daemon (SIGSTOP), as a host too busy to schedule it
// would, until the returned func is called or the test ends.
func (d *daemonProc) pause(t *testing.T) (resume func()) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume = func() { d.cmd.Process.Signal(syscall.SIGCONT) }
	t.Cleanup(resume)
	return resume
}
