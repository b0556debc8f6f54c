package top

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// rows builds rows with rates over one second: name, runs in the second,
// ns in the second.
func testRows() []*Row {
	mk := func(id uint32, typ, name string, runs, ns uint64, comm string) *Row {
		p := prog(id, name, runs, ns, t0.Add(time.Second))
		p.Type = typ
		if comm != "" {
			p.Owners = []api.Owner{{PID: int(id) * 100, Comm: comm}}
		}
		return &Row{ProgRow: p, prevAt: t0, havePrev: true}
	}
	return []*Row{
		mk(10, "xdp", "fw_ingress", 1_000_000, 50_000_000, "cilium-agent"), // 5% cpu, 50 ns
		mk(11, "socket_filter", "dns_snoop", 2000, 4_000_000, "coredns"),   // 0.4%, 2 µs
		mk(12, "tracepoint", "sched_probe", 0, 0, ""),                      // idle
		mk(13, "sched_cls", "tc_egress", 500_000, 100_000_000, "cilium-agent"),
	}
}

func names(rows []*Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Name
	}
	return out
}

func TestSort(t *testing.T) {
	for _, c := range []struct {
		key     string
		reverse bool
		want    []string
	}{
		{"cpu", false, []string{"tc_egress", "fw_ingress", "dns_snoop", "sched_probe"}},
		{"cpu", true, []string{"sched_probe", "dns_snoop", "fw_ingress", "tc_egress"}},
		{"runs", false, []string{"fw_ingress", "tc_egress", "dns_snoop", "sched_probe"}},
		// An idle program has no avg/run: it goes last both ways.
		{"avg", false, []string{"dns_snoop", "tc_egress", "fw_ingress", "sched_probe"}},
		{"avg", true, []string{"fw_ingress", "tc_egress", "dns_snoop", "sched_probe"}},
		{"name", false, []string{"dns_snoop", "fw_ingress", "sched_probe", "tc_egress"}},
		{"id", false, []string{"fw_ingress", "dns_snoop", "sched_probe", "tc_egress"}},
		{"type", false, []string{"tc_egress", "dns_snoop", "sched_probe", "fw_ingress"}},
	} {
		col, err := ColumnByKey(c.key)
		if err != nil {
			t.Fatal(err)
		}
		rows := testRows()
		Sort(rows, col, c.reverse)
		if got := names(rows); !slices.Equal(got, c.want) {
			t.Errorf("sort %s reverse=%v = %v, want %v", c.key, c.reverse, got, c.want)
		}
	}
}

func TestUnknownColumn(t *testing.T) {
	if _, err := ColumnByKey("speed"); !errors.Is(err, ErrUnknownColumn) {
		t.Errorf("ColumnByKey(speed) = %v, want ErrUnknownColumn", err)
	}
}

func TestFilter(t *testing.T) {
	for filter, want := range map[string][]string{
		"":        {"fw_ingress", "dns_snoop", "sched_probe", "tc_egress"},
		"FW":      {"fw_ingress"},              // name, any case
		"xdp":     {"fw_ingress"},              // type
		"cilium":  {"fw_ingress", "tc_egress"}, // owner comm
		"nothing": {},
	} {
		if got := names(Filter(testRows(), filter)); !slices.Equal(got, want) {
			t.Errorf("filter %q = %v, want %v", filter, got, want)
		}
	}
}

func TestOptionalColumns(t *testing.T) {
	rows := testRows()
	keys := func(cols []*Column) (out []string) {
		for _, c := range cols {
			out = append(out, c.Key)
		}
		return out
	}
	if got := keys(Visible(rows)); slices.Contains(got, "ipc") || slices.Contains(got, "sampled") {
		t.Errorf("columns without counters = %v", got)
	}
	rows[1].IPC = ptrTo(1.5)
	rows[2].SampledCPUPercent = ptrTo(0.3)
	got := keys(Visible(rows))
	if !slices.Contains(got, "ipc") || !slices.Contains(got, "sampled") || slices.Contains(got, "cycles") {
		t.Errorf("columns with ipc and sampled = %v", got)
	}
	col, _ := ColumnByKey("ipc")
	if col.Cell(rows[1]) != "1.50" || col.Cell(rows[0]) != "-" || col.Raw(rows[0]) != "" {
		t.Errorf("ipc cells %q %q", col.Cell(rows[1]), col.Cell(rows[0]))
	}
}

func TestCells(t *testing.T) {
	r := testRows()[0]
	r.Owners = append(r.Owners, api.Owner{PID: 7, Comm: "bpftool"})
	r.Attach = []api.AttachPoint{{Type: "xdp", Target: "ifindex 1 (lo)"}}
	want := map[string]string{"id": "10", "runs": "1.00M", "avg": "50 ns", "cpu": "5.00%", "owner": "cilium-agent/1000 +1", "attach": "xdp ifindex 1 (lo)"}
	for key, w := range want {
		col, _ := ColumnByKey(key)
		if got := col.Cell(r); got != w {
			t.Errorf("%s cell = %q, want %q", key, got, w)
		}
	}
}

// TestMapsColumn: the MAPS column shows only where some program uses maps,
// in binary units, "-" for programs without.
func TestMapsColumn(t *testing.T) {
	rows := testRows()
	zero := uint64(0)
	rows[0].MapBytes = &zero
	has := func() bool {
		return slices.ContainsFunc(Visible(rows), func(c *Column) bool { return c.Key == "maps" })
	}
	if has() {
		t.Error("MAPS shown while no program has map memory")
	}
	big := uint64(3 << 20)
	rows[1].MapBytes = &big
	if !has() {
		t.Error("MAPS not shown with a program using 3 MiB of maps")
	}
	col, _ := ColumnByKey("maps")
	if col.Cell(rows[1]) != "3.0M" || col.Raw(rows[1]) != "3145728" || col.Cell(rows[0]) != "-" || col.Cell(rows[2]) != "-" {
		t.Errorf("maps cells %q %q %q %q", col.Cell(rows[1]), col.Raw(rows[1]), col.Cell(rows[0]), col.Cell(rows[2]))
	}
}

// A program only its pin keeps (a loader that pinned it and exited) is
// owned by the pin, as bpftool's view names it, not by comm "" and pid 0.
func TestOwnerCellNamesAPin(t *testing.T) {
	for _, c := range []struct {
		owners []api.Owner
		want   string
	}{
		{nil, "-"},
		{[]api.Owner{{PID: 0, Pin: "/sys/fs/bpf/reg"}}, "pin:/sys/fs/bpf/reg"},
		{[]api.Owner{{PID: 42, Comm: "bpftool"}, {PID: 0, Pin: "/sys/fs/bpf/reg"}}, "bpftool/42 +1"},
	} {
		r := &Row{ProgRow: api.ProgRow{Owners: c.owners}}
		if got := ownerCell(r); got != c.want {
			t.Errorf("owners %+v: cell %q, want %q", c.owners, got, c.want)
		}
	}
}
