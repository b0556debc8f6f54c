package daemon_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// loadTC loads a TC program of ours named name: version 1 returns at once,
// version 2 does one more instruction (another tag).
func loadTC(t *testing.T, name string, version int) *ebpf.Program {
	t.Helper()
	insns := asm.Instructions{asm.Mov.Imm(asm.R0, 0)}
	if version > 1 {
		insns = append(insns, asm.Mov.Imm(asm.R1, int32(version)))
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.SchedCLS, AttachType: ebpf.AttachTCXIngress, License: "MIT",
		Instructions: append(insns, asm.Return()),
	})
	if err != nil {
		t.Fatalf("load TC program: %v", err)
	}
	return prog
}

// tcFilter is prog as the direct-action filter of dev's clsact ingress, as
// `tc filter replace dev DEV ingress bpf da` sets it: added the first time,
// replaced after.
func tcFilter(t *testing.T, dev netlink.Link, prog *ebpf.Program) {
	t.Helper()
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: dev.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd:          prog.FD(), Name: "bpfperf_dev8", DirectAction: true,
	}
	if err := netlink.FilterReplace(f); err != nil {
		t.Fatalf("tc filter replace on %s: %v", dev.Attrs().Name, err)
	}
}

// TestOneObjectOnEightDevices: one program of ours on 8 veth devices, 4
// through tcx links this process holds and 4 through netlink filters
// nobody holds, then each reloaded with changed code. Each device is its
// own identity, labelled as bpftool net lists it; each reload is one
// new_version on its own device, and each device's history runs on across
// its reload.
func TestOneObjectOnEightDevices(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir())
	devs := privtest.VethsInNetns(t, 8)
	name := uniqueName("dev8_")
	links := make([]link.Link, 4)
	var ids []uint32
	attach := func(version int) {
		ids = ids[:0]
		for i, dev := range devs {
			prog := loadTC(t, name, version)
			if i < 4 {
				if links[i] != nil {
					links[i].Close()
				}
				l, err := link.AttachTCX(link.TCXOptions{Program: prog, Interface: dev.Attrs().Index, Attach: ebpf.AttachTCXIngress})
				if err != nil {
					t.Fatalf("tcx on %s: %v", dev.Attrs().Name, err)
				}
				links[i] = l
			} else {
				if version == 1 {
					privtest.AddClsact(t, dev)
				}
				tcFilter(t, dev, prog)
			}
			info, _ := prog.Info()
			id, _ := info.ID()
			ids = append(ids, uint32(id))
			prog.Close() // the link or the filter holds it now
		}
	}
	t.Cleanup(func() {
		for _, l := range links {
			if l != nil {
				l.Close()
			}
		}
	})
	wantWhere := func(i int) string {
		kind := "tcx"
		if i >= 4 {
			kind = "tc"
		}
		return fmt.Sprintf("%s dev %s ingress", kind, devs[i].Attrs().Name)
	}

	attach(1)
	v1 := slices.Clone(ids)
	rows1 := settledRows(t, d, v1...)
	idents := map[string]bool{}
	for i, id := range v1 {
		r := rows1[id]
		if r.Where != wantWhere(i) {
			t.Errorf("device %d: where %q, want %q", i, r.Where, wantWhere(i))
		}
		idents[r.Identity] = true
		if i > 0 && r.Tag != rows1[v1[0]].Tag {
			t.Errorf("one object, two tags: %s and %s", r.Tag, rows1[v1[0]].Tag)
		}
	}
	if len(idents) != 8 {
		t.Fatalf("8 devices, %d identities: %v", len(idents), idents)
	}
	// What bpftool net lists for the netlink ones is what bfpperf says.
	out, _, _ := run("bpftool", "net", "-j")
	for i := 4; i < 8; i++ {
		want := fmt.Sprintf(`"devname":"%s","ifindex":%d,"kind":"clsact/ingress","name":"bpfperf_dev8","id":%d`, devs[i].Attrs().Name, devs[i].Attrs().Index, v1[i])
		if !strings.Contains(out, want) {
			t.Errorf("bpftool net does not list %s:\n%s", want, out)
		}
	}
	time.Sleep(time.Second) // a second of history before the reload

	attach(2)
	v2 := slices.Clone(ids)
	rows2 := settledRows(t, d, v2...)
	for i, id := range v2 {
		if rows2[id].Identity != rows1[v1[i]].Identity {
			t.Errorf("device %d after reload: identity %q, before %q", i, rows2[id].Identity, rows1[v1[i]].Identity)
		}
		if rows2[id].Tag == rows1[v1[i]].Tag {
			t.Errorf("device %d: the changed program has the old tag", i)
		}
	}
	var nv []api.Event
	eventually(t, "8 new_version events", func() bool { nv = eventsOf(t, d, "new_version"); return len(nv) >= 8 })
	time.Sleep(time.Second)
	nv = eventsOf(t, d, "new_version")
	seen := map[string]bool{}
	for _, e := range nv {
		seen[e.Identity] = true
	}
	if len(nv) != 8 || len(seen) != 8 {
		t.Errorf("%d new_version events on %d identities, want 8 on 8: %+v", len(nv), len(seen), nv)
	}
	for i, id := range v2 {
		var points []api.HistoryPoint
		d.json(t, &points, "history", rows2[id].IdentityID, "--since", "5m")
		instances := map[uint32]bool{}
		reloads := 0
		for _, p := range points {
			instances[p.ID] = true
			if p.Reload {
				reloads++
			}
		}
		if !instances[v1[i]] || !instances[id] || len(instances) != 2 || reloads != 1 {
			t.Errorf("device %d: history over instances %v with %d reloads, want %d then %d, one reload", i, instances, reloads, v1[i], id)
		}
	}
	// Summed by name, the 8 are one row.
	var grouped []api.ProgRow
	d.json(t, &grouped, "progs", "--group", "name")
	for _, r := range grouped {
		if r.Name == name && r.Instances != 8 {
			t.Errorf("progs --group name: %d programs in %s's row, want 8", r.Instances, name)
		}
	}
}
