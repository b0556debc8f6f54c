package daemon_test

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestStoreTools(t *testing.T) {
	parallelWaiting(t)
	privtest.Root(t)
	state := t.TempDir()
	name := uniqueName("e2e_tool")
	prog, err := privtest.LoadSocketFilter(name)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, _ := prog.Info()
	id, _ := info.ID()
	d := startDaemon(t, state)
	for range 8 {
		privtest.Run(prog, 7)
		time.Sleep(200 * time.Millisecond)
	}
	eventually(t, "all 56 runs sampled", func() bool {
		var p api.ProgDetail
		return d.query(&p, "show", name) == nil && p.RunCnt == 56
	})

	var st api.StoreStats
	d.json(t, &st, "store", "stats")
	if st.Programs == 0 || st.Groups["raw"].Samples == 0 || st.Newest.Before(time.Now().Add(-time.Minute)) {
		t.Errorf("store stats = %+v", st)
	}
	if out := d.cli(t, "store", "check"); !strings.Contains(out, "store is consistent") {
		t.Errorf("store check: %s", out)
	}

	// The export holds exactly the samples history shows, as CSV and JSONL.
	var hist []api.HistoryPoint
	d.json(t, &hist, "history", fmt.Sprint(id), "--since", "10m")
	rows, err := csv.NewReader(strings.NewReader(d.cli(t, "export", "--since", "10m", "-o", "csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != strings.Join(api.ExportFields, ",") {
		t.Errorf("csv header %v", rows[0])
	}
	var mine int
	var lastCnt string
	for _, r := range rows[1:] {
		if r[2] == fmt.Sprint(id) {
			mine++
			lastCnt = r[6]
		}
	}
	if mine < len(hist) || lastCnt != "56" {
		t.Errorf("csv export: %d rows of program %d ending at run_cnt %s; history has %d points", mine, id, lastCnt, len(hist))
	}
	sc := bufio.NewScanner(strings.NewReader(d.cli(t, "export", "--since", "10m", "-o", "jsonl")))
	jsonl := 0
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("jsonl line %q: %v", sc.Text(), err)
		}
		if rec["id"] == float64(id) {
			jsonl++
		}
	}
	if jsonl != mine {
		t.Errorf("jsonl has %d rows of the program, csv %d", jsonl, mine)
	}

	// Compaction is offline only, and keeps everything.
	stdout, stderr, code := run(bin.daemon, "--state-dir", state, "--compact")
	oneLineError(t, "compact while the daemon runs", stdout, stderr, code, "in use")
	d.stop(t, syscall.SIGTERM)
	if out, errOut, code := run(bin.daemon, "--state-dir", state, "--compact"); code != 0 || !strings.Contains(out, "compacted") {
		t.Fatalf("compact: exit %d %s %s", code, out, errOut)
	}
	out, errOut, code := run(bin.cli, "store", "check", "--file", filepath.Join(state, daemon.StoreFile))
	if code != 0 {
		t.Errorf("check after compact: %s %s", out, errOut)
	}
	d = startDaemon(t, state)
	var after []api.HistoryPoint
	d.json(t, &after, "history", fmt.Sprint(id), "--since", "10m")
	if len(after) < len(hist) || after[len(hist)-1].RunCnt != hist[len(hist)-1].RunCnt {
		t.Errorf("history after compaction: %d points, was %d", len(after), len(hist))
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "-o", "xml"}, `-o "xml"`},
		{[]string{"export", "--since", "tomorrow"}, "--since"},
		{[]string{"export", "--since", "1h", "--until", "2h"}, "not after --since"},
		{[]string{"events", "--since", "-1h"}, "--since"},
		{[]string{"store", "stats", "-o", "yaml"}, `-o "yaml"`},
		{[]string{"store", "check", "--file", filepath.Join(state, daemon.StoreFile)}, "running bpfperfd"},
		{[]string{"store", "check", "--file", "/nonexistent/x.db"}, "--file"},
		{[]string{"history", name, "--step", "1s", "--since", "400d"}, "more than"},
	} {
		stdout, stderr, code := run(bin.cli, append([]string{"--socket", d.socket}, c.args...)...)
		oneLineError(t, "bpfperf "+strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}
}

// A program reloaded under the same name is one history, with the reload
// marked; new code under the same name is a new version.
func TestReloadsAreStitched(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir())
	name := uniqueName("e2e_rel")
	load := func(extra int32) (*ebpf.Program, uint32) {
		insns := asm.Instructions{asm.Mov.Imm(asm.R0, extra), asm.Mov.Imm(asm.R0, 0), asm.Return()}
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SocketFilter, License: "MIT", Instructions: insns})
		if err != nil {
			t.Fatal(err)
		}
		info, _ := p.Info()
		id, _ := info.ID()
		return p, uint32(id)
	}
	seen := func(id uint32, loaded bool) func() bool {
		return func() bool {
			var rows []api.ProgRow
			return d.query(&rows, "progs", "--all") == nil && hasProg(rows, id, loaded)
		}
	}
	first, id1 := load(1)
	privtest.Run(first, 10)
	eventually(t, "the first instance", seen(id1, true))
	time.Sleep(300 * time.Millisecond)
	first.Close()
	eventually(t, "the first instance to go", seen(id1, false))

	second, id2 := load(1) // same code: a reload
	defer second.Close()
	privtest.Run(second, 5)
	eventually(t, "the second instance", seen(id2, true))
	time.Sleep(300 * time.Millisecond)

	var hist []api.HistoryPoint
	d.json(t, &hist, "history", name, "--since", "5m")
	reloads := 0
	for i, p := range hist {
		if p.Reload {
			reloads++
			if p.ID != id2 || hist[i-1].ID != id1 || p.RunsPerSec != nil {
				t.Errorf("reload point %+v after %+v", p, hist[i-1])
			}
		}
	}
	if reloads != 1 || hist[0].ID != id1 || hist[len(hist)-1].ID != id2 || hist[len(hist)-1].RunCnt != 5 {
		t.Errorf("stitched history: %d reloads, ids %d..%d, last run_cnt %d", reloads, hist[0].ID, hist[len(hist)-1].ID, hist[len(hist)-1].RunCnt)
	}

	second.Close()
	eventually(t, "the second instance to go", seen(id2, false))
	third, id3 := load(2) // new code: a new version
	defer third.Close()
	privtest.Run(third, 5)
	eventually(t, "the new version", seen(id3, true))
	// new_version comes once the identity is settled, a tick or more after
	// the program appeared and once it ran (a program neither attached nor
	// run waits for an attach point up to 10 s).
	kinds := []string{}
	eventually(t, "a new_version event", func() bool {
		var events []api.Event
		d.json(t, &events, "events", "--since", "5m", "--prog", name)
		kinds = kinds[:0]
		for _, e := range events {
			kinds = append(kinds, e.Kind)
		}
		return slices.Contains(kinds, "new_version")
	})
	if got := strings.Join(kinds, ","); got != "loaded,unloaded,loaded,unloaded,loaded,new_version" {
		t.Errorf("events of %s: %s", name, got)
	}
}
