package daemon_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// newMap creates a uniquely named map for the test.
func newMap(t *testing.T, typ ebpf.MapType, maxEntries uint32) (*ebpf.Map, uint32) {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: uniqueName("m"), Type: typ, KeySize: 4, ValueSize: 8, MaxEntries: maxEntries})
	if err != nil {
		t.Fatalf("create %v map: %v", typ, err)
	}
	t.Cleanup(func() { m.Close() })
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return m, uint32(id)
}

// setEntries makes keys 0..n-1 the map's only keys, out of 0..max-1.
func setEntries(t *testing.T, m *ebpf.Map, n, max uint32) {
	t.Helper()
	for k := uint32(0); k < max; k++ {
		var err error
		if k < n {
			err = m.Put(k, uint64(k))
		} else if err = m.Delete(k); errors.Is(err, ebpf.ErrKeyNotExist) {
			err = nil
		}
		if err != nil {
			t.Fatalf("key %d: %v", k, err)
		}
	}
}

// mapRow returns the daemon's row for map id, or ok=false.
func (d *daemonProc) mapRow(t *testing.T, id uint32) (api.Map, bool) {
	t.Helper()
	var maps api.Maps
	d.json(t, &maps, "maps")
	for _, m := range maps.Maps {
		if m.ID == id {
			return m, true
		}
	}
	return api.Map{}, false
}

func (d *daemonProc) waitEntries(t *testing.T, id uint32, want int64) api.Map {
	t.Helper()
	var row api.Map
	eventually(t, fmt.Sprintf("map %d to read %d entries", id, want), func() bool {
		var ok bool
		row, ok = d.mapRow(t, id)
		return ok && row.Entries != nil && *row.Entries == want
	})
	return row
}

// mapEvents returns the daemon's map events, by map id.
func (d *daemonProc) mapEvents(t *testing.T) map[uint32][]api.Event {
	t.Helper()
	var ev []api.Event
	d.json(t, &ev, "events", "--since", "1h")
	out := map[uint32][]api.Event{}
	for _, e := range ev {
		if e.MapID != 0 {
			out[e.MapID] = append(out[e.MapID], e)
		}
	}
	return out
}

// TestMaps: a hash map filled to K, then further, then to K/2 reads
// exactly that at each step, with the memory bpftool prints; crossing 80%
// and 95% raises one event each; a map that grows at every reading raises
// a leak event; a full array raises nothing; the daemon keeps no fd of any
// of them.
func TestMaps(t *testing.T) {
	privtest.Root(t)
	needBpftool(t)
	const max = 1000
	hash, hashID := newMap(t, ebpf.Hash, max)
	arr, arrID := newMap(t, ebpf.Array, 16)
	for k := uint32(0); k < 16; k++ {
		if err := arr.Put(k, uint64(1)); err != nil {
			t.Fatal(err)
		}
	}
	leaky, leakyID := newMap(t, ebpf.Hash, 100_000)
	// A program that uses the hash map.
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: uniqueName("mapuser"), Type: ebpf.SocketFilter, License: "MIT",
		Instructions: asm.Instructions{asm.LoadMapPtr(asm.R1, hash.FD()), asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	pinfo, _ := prog.Info()
	progID, _ := pinfo.ID()

	d := startDaemon(t, t.TempDir(), "--maps.every", "200ms", "--maps.leak-window", "2s")

	// Below 80%, then past 80%, then past 95%, then K/2.
	for _, n := range []int64{700, 850, 960, 480} {
		setEntries(t, hash, uint32(n), max)
		row := d.waitEntries(t, hashID, n)
		if row.Counted != "kernel" || row.FillPercent == nil || *row.FillPercent != float64(n)*100/max {
			t.Errorf("%d entries: row %+v", n, row)
		}
	}
	row, _ := d.mapRow(t, hashID)
	var bt struct {
		Memlock uint64 `json:"bytes_memlock"`
	}
	out, errOut, code := run("bpftool", "map", "show", "id", fmt.Sprint(hashID), "-j")
	if code != 0 || json.Unmarshal([]byte(out), &bt) != nil {
		t.Fatalf("bpftool map show: %d %s %s", code, out, errOut)
	}
	if row.MemoryBytes != bt.Memlock || row.MemoryBytes == 0 {
		t.Errorf("memory %d, bpftool says %d", row.MemoryBytes, bt.Memlock)
	}
	if len(row.Programs) != 1 || row.Programs[0] != uint32(progID) {
		t.Errorf("programs using the map: %v, want [%d]", row.Programs, progID)
	}
	if len(row.Owners) == 0 || row.Owners[0].PID != os.Getpid() {
		t.Errorf("owners %+v, want this process (%d)", row.Owners, os.Getpid())
	}

	// Grow the leaky map by a few keys every 40 ms, five times a reading.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := uint32(0); ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			leaky.Put(k, uint64(k))
		}
	}()
	eventually(t, "a leak event for the growing map", func() bool {
		for _, e := range d.mapEvents(t)[leakyID] {
			if e.Kind == "map_leak" {
				return true
			}
		}
		return false
	})
	close(stop)
	wg.Wait()

	ev := d.mapEvents(t)
	var fills []string
	for _, e := range ev[hashID] {
		if e.Kind == "map_fill" {
			fills = append(fills, e.Detail)
		}
	}
	if len(fills) != 2 || !strings.Contains(fills[0], "crossed 80%") || !strings.Contains(fills[1], "crossed 95%") {
		t.Errorf("fill events of the hash map: %q, want one at 80%% and one at 95%%", fills)
	}
	if len(ev[arrID]) != 0 {
		t.Errorf("events for a full array map: %+v, want none", ev[arrID])
	}
	if row, ok := d.mapRow(t, arrID); !ok || row.Entries != nil {
		t.Errorf("array row %+v: want no entries", row)
	}

	// History: the readings of the hash map include K and K/2.
	var hist []api.MapPoint
	d.json(t, &hist, "history", "--map", fmt.Sprint(hashID), "--since", "5m")
	seen := map[int64]bool{}
	for _, p := range hist {
		if p.Entries != nil {
			seen[*p.Entries] = true
		}
	}
	if !seen[960] || !seen[480] {
		t.Errorf("history of map %d: %d points without 960 and 480", hashID, len(hist))
	}

	// The daemon holds none of the maps between readings.
	for _, id := range []uint32{hashID, arrID, leakyID} {
		if n := mapFds(t, d.cmd.Process.Pid, id); n != 0 {
			t.Errorf("bpfperfd holds %d fds of map %d", n, id)
		}
	}
}

// mapFds counts pid's fds holding map id.
func mapFds(t *testing.T, pid int, id uint32) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fdinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if strings.Contains(string(info), fmt.Sprintf("map_id:\t%d\n", id)) {
			n++
		}
	}
	return n
}

func TestMapsBadInput(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--maps.every", "200ms")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"maps", "show", "4000000000"}, "unknown map"},
		{[]string{"maps", "show", "no_such_map_xyz"}, `unknown map "no_such_map_xyz"`},
		{[]string{"history", "--map", "no_such_map_xyz"}, "unknown map"},
		{[]string{"maps", "show"}, "missing MAP"},
		{[]string{"maps", "-o", "yaml"}, `-o "yaml"`},
	} {
		stdout, stderr, code := run(bin.cli, append([]string{"--socket", d.socket}, c.args...)...)
		oneLineError(t, strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--maps.every", "1ms"}, "--maps.every"},
		{[]string{"--maps.every", "1s", "--maps.leak-window", "1s"}, "--maps.leak-window"},
	} {
		dir := t.TempDir()
		stdout, stderr, code := run(bin.daemon, append([]string{"--state-dir", dir, "--socket", dir + "/api.sock"}, c.args...)...)
		oneLineError(t, "bpfperfd "+strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}
}
