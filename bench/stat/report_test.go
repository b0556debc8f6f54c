package stat

import (
	"bytes"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/bench"
)

// TestReportOneRowPerProgram: programs that share the kernel's cut name
// (execsnoop's enter and exit) are two results under their full names,
// and two programs sharing a full name are two results too, NAME and
// NAME#2, each lined up with itself across runs though the ids differ;
// nothing is summed over different programs.
func TestReportOneRowPerProgram(t *testing.T) {
	p := func(id uint32, name string, instance int, runs uint64) Program {
		kernel := name
		if len(kernel) > 15 {
			kernel = kernel[:15]
		}
		return Program{ID: id, Type: "tracepoint", Name: name, KernelName: kernel, Tag: "t" + name, Instance: instance,
			Delta: Counters{RunCnt: runs, RunTimeNs: runs * 100}}
	}
	const enter, exit = "tracepoint__syscalls__sys_enter_execve", "tracepoint__syscalls__sys_exit_execve"
	ms := []Measurement{
		{Wall: time.Second, Programs: []Program{p(10, enter, 1, 7), p(11, exit, 1, 5), p(12, "dup", 1, 3), p(13, "dup", 2, 4), p(14, "", 1, 1)}},
		{Wall: time.Second, Programs: []Program{p(20, enter, 1, 8), p(21, exit, 1, 6), p(22, "dup", 1, 30), p(23, "dup", 2, 40), p(24, "", 1, 2)}},
	}
	rep := Report(ms, bench.MacroRun{Command: []string{"x"}}, nil)
	want := map[string]struct {
		name, kernel string
		ids          []uint32
		runs         []uint64
	}{
		"stat/tracepoint/" + enter: {enter, "tracepoint__sys", []uint32{10, 20}, []uint64{7, 8}},
		"stat/tracepoint/" + exit:  {exit, "tracepoint__sys", []uint32{11, 21}, []uint64{5, 6}},
		"stat/tracepoint/dup":      {"dup", "", []uint32{12, 22}, []uint64{3, 30}},
		"stat/tracepoint/dup#2":    {"dup", "", []uint32{13, 23}, []uint64{4, 40}},
		"stat/tracepoint/tag=t":    {"", "", []uint32{14, 24}, []uint64{1, 2}},
	}
	if len(rep.Results) != len(want) {
		t.Errorf("%d results, want %d", len(rep.Results), len(want))
	}
	for _, r := range rep.Results {
		w, ok := want[r.Name]
		if !ok {
			t.Errorf("unexpected result %s (ids %v)", r.Name, r.Macro.IDs)
			continue
		}
		var runs []uint64
		for _, s := range r.Macro.PerRun {
			runs = append(runs, s.Runs)
		}
		if r.Macro.Name != w.name || r.Macro.KernelName != w.kernel || !slices.Equal(r.Macro.IDs, w.ids) || !slices.Equal(runs, w.runs) {
			t.Errorf("%s: name %q kernel %q ids %v runs %v, want %q %q %v %v", r.Name, r.Macro.Name, r.Macro.KernelName, r.Macro.IDs, runs, w.name, w.kernel, w.ids, w.runs)
		}
	}
	var table bytes.Buffer
	if err := bench.WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"tracepoint/" + enter, "tracepoint/" + exit, "tracepoint/dup", "tracepoint/dup#2"} {
		if !regexp.MustCompile(`(?m)^ *` + regexp.QuoteMeta(row) + ` +1[0-9],2[0-9] `).MatchString(table.String()) {
			t.Errorf("table has no row %q:\n%s", row, table.String())
		}
	}
}

// TestMeasureInstances: programs sharing a type and name are numbered in
// id order among all the programs seen, whether they ran or not; one
// loaded after another of its name was gone (a reload) takes that one's
// number.
func TestMeasureInstances(t *testing.T) {
	r := func(id uint32, name string, runs uint64) Reading {
		return Reading{ID: id, Type: "xdp", Name: name, Tag: name, Counters: Counters{RunCnt: runs, RunTimeNs: runs}}
	}
	script := [][]Reading{
		{r(10, "dup", 1), r(11, "dup", 1), r(12, "rel", 1), r(15, "other", 1)},
		{r(10, "dup", 1), r(11, "dup", 2), r(13, "rel", 1), r(15, "other", 1)},
		{r(10, "dup", 1), r(11, "dup", 3), r(13, "rel", 2), r(14, "rel", 1), r(15, "other", 1)},
	}
	tr := newTracker(script[0])
	tr.see(script[1])
	tr.see(script[2])
	got := map[uint32]int{}
	for _, p := range tr.programs(script[2], Config{Named: func(Reading) bool { return true }}) {
		got[p.ID] = p.Instance
	}
	want := map[uint32]int{10: 1, 11: 2, 12: 1, 13: 1, 14: 2, 15: 1}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("program %d: instance %d, want %d (all: %v)", id, got[id], n, got)
		}
	}
	// Reported or not, the numbering is the same: 10 is idle, 11 is
	// still the second dup.
	for _, p := range tr.programs(script[2], Config{}) {
		if p.ID == 10 {
			t.Errorf("idle program 10 reported")
		}
		if p.ID == 11 && p.Instance != 2 {
			t.Errorf("program 11 alone: instance %d, want 2", p.Instance)
		}
	}
}
