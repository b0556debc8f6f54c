package daemon_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestKprobeMissedInVM boots Debian's 6.12 (kprobes, and the links' missed
// counts of Linux 6.7, which this host's kernel lacks) with bpfperfd and
// bpfperf built for it, and runs TestKprobeMissedEndToEnd there, and in
// the same boot TestNetkitEndToEnd (netkit devices, CONFIG_NETKIT=y in
// Debian's 6.12, unset in this host's kernel).
func TestKprobeMissedInVM(t *testing.T) {
	vmtest.RunTestsWithCommands(t, vmtest.Config{Series: vmtest.Kernel612}, []string{"../cmd/bpfperfd", "../cmd/bpfperf"},
		[]string{"TestKprobeMissedEndToEnd", "TestNetkitEndToEnd"})
}

// TestKprobeMissedEndToEnd: a kretprobe and a kretprobe_multi link on
// pipe_read miss the reads they have no return-probe instance for; the
// daemon reports each link's missed count, equal to the kernel's, in show
// (API and CLI) and in /metrics, beside the programs' recursion misses.
func TestKprobeMissedEndToEnd(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs kprobes: runs in the 6.12 VM (TestKprobeMissedInVM)")
	}
	privtest.Root(t)
	type probe struct {
		name string
		l    link.Link
	}
	var probes []probe
	for _, multi := range []bool{false, true} {
		attach := ebpf.AttachNone
		if multi {
			attach = ebpf.AttachTraceKprobeMulti
		}
		name := uniqueName("vm_kp")
		prog, err := privtest.LoadKprobe(name, attach)
		if err != nil {
			t.Fatalf("load %s: %v", name, err)
		}
		defer prog.Close()
		var l link.Link
		if multi {
			l, err = link.KretprobeMulti(prog, link.KprobeMultiOptions{Symbols: []string{privtest.PipeRead}})
		} else {
			l, err = link.Kretprobe(privtest.PipeRead, prog, nil)
		}
		if err != nil {
			t.Fatalf("attach %s: %v", name, err)
		}
		defer l.Close()
		probes = append(probes, probe{name, l})
	}
	privtest.BlockInPipeRead(t, 16) // more than either link keeps instances for on 2 CPUs

	web := freeAddr(t)
	d := startDaemon(t, t.TempDir(), "--web.listen-address", web)
	for _, p := range probes {
		info, err := p.l.Info()
		if err != nil {
			t.Fatal(err)
		}
		var want uint64
		if m := info.KprobeMulti(); m != nil {
			want = m.Missed
		} else {
			want = info.PerfEvent().Kprobe().Missed
		}
		if want == 0 {
			t.Fatalf("%s: the kernel says its link missed nothing", p.name)
		}
		var detail api.ProgDetail
		eventually(t, p.name+"'s attach point in show", func() bool {
			return d.query(&detail, "show", p.name) == nil && len(detail.Meta.Attach) == 1
		})
		a := detail.Meta.Attach[0]
		if a.LinkID != uint32(info.ID) || a.Missed == nil || *a.Missed != want {
			t.Errorf("%s: show's attach point %+v (missed %v), want link %d missed %d", p.name, a, a.Missed, info.ID, want)
		}
		text := d.cli(t, "show", p.name)
		t.Logf("bpfperf show %s:\n%s", p.name, text)
		for _, line := range []string{fmt.Sprintf("(link %d, missed %d)", info.ID, want), fmt.Sprintf("links_missed:       %d ", want)} {
			if !strings.Contains(text, line) {
				t.Errorf("bpfperf show %s lacks %q:\n%s", p.name, line, text)
			}
		}
		_, _, metrics := get(t, "http://"+web+"/metrics") // after show has the links
		series := regexp.MustCompile(fmt.Sprintf(`(?m)^bpfperf_link_missed_total\{id="%d",link_id="%d"\} (\d+)$`, detail.ID, info.ID))
		if m := series.FindSubmatch(metrics); m == nil || string(m[1]) != fmt.Sprint(want) {
			t.Errorf("/metrics: %s's link_missed series %q, want %d", p.name, m, want)
		}
	}
}
