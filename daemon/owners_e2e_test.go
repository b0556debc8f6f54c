package daemon_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// ownerChildEnv makes the test binary a helper process that loads
// programs and maps ("PROGS MAPS ENTRIES"), prints "ready", runs each of
// its programs N times for every "run N" line on stdin (answering "ok"),
// and exits when stdin closes.
const ownerChildEnv = "BPFPERF_OWNER_CHILD"

func ownerChild() int {
	var progs, maps, entries int
	if _, err := fmt.Sscan(os.Getenv(ownerChildEnv), &progs, &maps, &entries); err != nil {
		fmt.Println("bad", ownerChildEnv, err)
		return 2
	}
	rlimit.RemoveMemlock()
	var loaded []*ebpf.Program
	for i := range progs {
		p, err := privtest.LoadSocketFilter(fmt.Sprintf("own%d_%d", os.Getpid()%100000, i))
		if err != nil {
			fmt.Println("load:", err)
			return 1
		}
		defer p.Close()
		loaded = append(loaded, p)
	}
	for i := range maps {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: fmt.Sprintf("own%d_m%d", os.Getpid()%100000, i), Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 1000})
		if err != nil {
			fmt.Println("map:", err)
			return 1
		}
		defer m.Close()
		for k := range entries {
			m.Put(uint32(k), uint64(k))
		}
	}
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "run %d", &n); err != nil {
			fmt.Println("bad line:", sc.Text())
			return 2
		}
		for _, p := range loaded {
			if err := privtest.Run(p, n); err != nil {
				fmt.Println("run:", err)
				return 1
			}
		}
		fmt.Println("ok")
	}
	return 0
}

// ownerProc is a running helper process.
type ownerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startOwner(t *testing.T, progs, maps, entries int) *ownerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %d", ownerChildEnv, progs, maps, entries))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &ownerProc{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() { o.stop() })
	o.expect(t, "ready")
	return o
}

func (o *ownerProc) expect(t *testing.T, want string) {
	t.Helper()
	if !o.out.Scan() || o.out.Text() != want {
		t.Fatalf("helper process %d: got %q, want %q", o.cmd.Process.Pid, o.out.Text(), want)
	}
}

func (o *ownerProc) run(t *testing.T, n int) {
	t.Helper()
	fmt.Fprintf(o.stdin, "run %d\n", n)
	o.expect(t, "ok")
}

func (o *ownerProc) stop() {
	if o.cmd.ProcessState == nil {
		o.stdin.Close()
		o.cmd.Wait()
	}
}

func (o *ownerProc) name() string {
	return fmt.Sprintf("%s[%d]", commOf(o.cmd.Process.Pid), o.cmd.Process.Pid)
}

func commOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

func ownerRow(rows []api.OwnerRow, name string) (api.OwnerRow, bool) {
	for _, r := range rows {
		if r.Owner == name {
			return r, true
		}
	}
	return api.OwnerRow{}, false
}

// TestOwners: two processes each load programs and maps and run their
// programs a known number of times. Each owner's row holds exactly its
// programs and maps, and its totals equal the sums of their rows in progs
// and maps; when one exits its row leaves the live view and stays in the
// --since view, marked gone.
func TestOwners(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--maps.every", "200ms")
	type want struct {
		proc                 *ownerProc
		progs, maps, entries int
		runs                 int
	}
	wants := []*want{{progs: 2, maps: 1, entries: 100, runs: 700}, {progs: 3, maps: 2, entries: 10, runs: 300}}
	for _, w := range wants {
		w.proc = startOwner(t, w.progs, w.maps, w.entries)
		w.proc.run(t, w.runs)
	}
	var owners api.Owners
	eventually(t, "both owners with all their programs, maps and runs", func() bool {
		d.json(t, &owners, "owners")
		for _, w := range wants {
			r, ok := ownerRow(owners.Owners, w.proc.name())
			if !ok || r.Programs != w.progs || r.Maps != w.maps || r.RunCnt != uint64(w.progs*w.runs) {
				return false
			}
		}
		return true
	})
	var progs []api.ProgRow
	d.json(t, &progs, "progs")
	var maps api.Maps
	d.json(t, &maps, "maps")
	d.json(t, &owners, "owners")
	for _, w := range wants {
		pid := w.proc.cmd.Process.Pid
		r, _ := ownerRow(owners.Owners, w.proc.name())
		var n int
		var runs, runTime uint64
		var cpu float64
		for _, p := range progs {
			if len(p.Owners) > 0 && p.Owners[0].PID == pid {
				n++
				runs += p.RunCnt
				runTime += p.RunTimeNs
				if p.CPUPercent != nil {
					cpu += *p.CPUPercent
				}
			}
		}
		var nm int
		var mem uint64
		for _, m := range maps.Maps {
			if len(m.Owners) > 0 && m.Owners[0].PID == pid {
				nm++
				mem += m.MemoryBytes
			}
		}
		if r.Programs != n || r.RunCnt != runs || r.RunTimeNs != runTime || r.Maps != nm || r.MapBytes != mem || mem == 0 {
			t.Errorf("owner %s: %d programs %d runs %d ns, %d maps %d bytes; its programs and maps sum to %d programs %d runs %d ns, %d maps %d bytes",
				r.Owner, r.Programs, r.RunCnt, r.RunTimeNs, r.Maps, r.MapBytes, n, runs, runTime, nm, mem)
		}
		if r.RunCnt != uint64(w.progs*w.runs) {
			t.Errorf("owner %s: %d runs, want exactly %d", r.Owner, r.RunCnt, w.progs*w.runs)
		}
	}

	gone := wants[0]
	name := gone.proc.name()
	gone.proc.stop()
	eventually(t, "the exited owner to leave the live view", func() bool {
		d.json(t, &owners, "owners")
		_, ok := ownerRow(owners.Owners, name)
		return !ok
	})
	time.Sleep(300 * time.Millisecond) // a map reading after the exit
	d.json(t, &owners, "owners", "--since", "5m")
	r, ok := ownerRow(owners.Owners, name)
	if !ok || r.Present || r.Programs != gone.progs || r.Maps != gone.maps || r.RunCnt != uint64(gone.progs*gone.runs) || r.MapBytes == 0 {
		t.Errorf("owners --since 5m: row of %s %+v (found %v); want gone, %d programs, %d maps, %d runs", name, r, ok, gone.progs, gone.maps, gone.progs*gone.runs)
	}
	if r2, ok := ownerRow(owners.Owners, wants[1].proc.name()); !ok || !r2.Present || r2.RunCnt != uint64(wants[1].progs*wants[1].runs) {
		t.Errorf("owners --since 5m: row of the live owner %+v (found %v)", r2, ok)
	}

	// Bad input: one line, non-zero exit.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"owners", "--since", "yesterday"}, "--since"},
		{[]string{"owners", "extra"}, `unexpected argument "extra"`},
		{[]string{"owners", "--owner", "no_such_owner"}, `unknown owner "no_such_owner"`},
	} {
		stdout, stderr, code := run(bin.cli, append([]string{"--socket", d.socket}, c.args...)...)
		oneLineError(t, strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}
	// --owner picks one owner, by comm[pid], pid or comm.
	live := wants[1].proc
	for _, ref := range []string{live.name(), strconv.Itoa(live.cmd.Process.Pid)} {
		d.json(t, &owners, "owners", "--owner", ref)
		if len(owners.Owners) != 1 || owners.Owners[0].Owner != live.name() {
			t.Errorf("owners --owner %s: %+v", ref, owners.Owners)
		}
	}
}

// TestOwnersPinned: a program and a map that no process holds, only a pin,
// are charged to their pin paths.
func TestOwnersPinned(t *testing.T) {
	privtest.Root(t)
	root := t.TempDir()
	if err := unix.Mount("bpf", root, "bpf", 0, ""); err != nil {
		privtest.Skip(t, "mount bpffs: "+err.Error())
	}
	defer unix.Unmount(root, unix.MNT_DETACH)
	defer os.Remove(filepath.Join(root, "flows"))
	defer os.Remove(filepath.Join(root, "filter"))
	m, _ := newMap(t, ebpf.Hash, 10)
	prog, err := privtest.LoadSocketFilter(uniqueName("pinned"))
	if err != nil {
		t.Fatal(err)
	}
	mapPin, progPin := filepath.Join(root, "flows"), filepath.Join(root, "filter")
	if err := m.Pin(mapPin); err != nil {
		t.Fatal(err)
	}
	if err := prog.Pin(progPin); err != nil {
		t.Fatal(err)
	}
	m.Close()
	prog.Close()
	// Started after the pins, so its first owners scan finds no process
	// holding them (owners are rescanned when programs appear, and every
	// 2 minutes).
	d := startDaemon(t, t.TempDir(), "--maps.every", "200ms", "--bpffs", root)
	var owners api.Owners
	eventually(t, "the pinned map and program charged to their pins", func() bool {
		d.json(t, &owners, "owners")
		mr, ok1 := ownerRow(owners.Owners, "pin:"+mapPin)
		pr, ok2 := ownerRow(owners.Owners, "pin:"+progPin)
		return ok1 && ok2 && mr.Kind == "pin" && mr.Maps == 1 && mr.MapBytes > 0 && pr.Programs == 1
	})
}
