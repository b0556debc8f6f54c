package daemon_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// The parity test holds every CLI view's JSON to its table: what a person
// reads in `-o table` a script must find in `-o json`. It runs each view
// both ways against a real bpfperfd watching real programs, cuts the table
// into its columns and `field:` lines, and looks each shown value up in
// the JSON through the view's mapping below. A column or field the mapping
// does not name fails, so a new column fails until its JSON key is named
// (and exists).
//
// The check is presence, not equality: the table and the JSON come from
// separate calls, and rates move between them. A cell that reads "-" (or "- (why)" with no
// why key) shows nothing; a cell that reads zero may be an omitempty key
// left out. Ranged views get a fixed --since and --until, so both calls
// read the same rows, and are joined row by row; live views are joined by
// a key column.
//
// Views with no JSON to hold to a table are not here: regressions show
// (its -o names a pprof file), check (an exit status), export (CSV and
// JSON lines only), store salvage (offline), the profile files (capture,
// get, merge, diff, view), bench list and plot, and top without --once.
// latency and history --latency need fentry/fexit: they run here where the
// kernel allows it and are logged as left out where it refuses; in the VM,
// TestJSONParityFentry runs them with counters enable.

// parityView is one CLI view: its arguments and its output's blocks, in
// the order the table prints them.
type parityView struct {
	name   string
	args   []string
	blocks []parityBlock
}

// blockKind is how a block of the table output reads.
type blockKind int

const (
	tableBlock  blockKind = iota // a header line and rows in tabwriter columns
	fieldsBlock                  // "field: value" lines
	textBlock                    // free text up to a blank line (or the end, if last): only its keys are checked
	lineBlock                    // one line of free text
)

type parityBlock struct {
	kind blockKind
	// json is the path from the JSON document to this block's object
	// (fields) or array (table) ("" for the document itself).
	json string
	// keys maps each header or field to the JSON keys, relative to a row
	// or the block's object, that carry its value: comma-separated keys
	// are all needed, "a|b" means either. A trailing "*" in a field
	// matches fields named from data ("counters sampled cycles"). For a
	// text or line block, the key "" names what its text shows.
	keys map[string]string
	// why names, per field, the key that says why a value is missing
	// where the table prints "- (reason)".
	why map[string]string
	// join finds a table row's JSON row: by position (nil, for views on
	// a fixed range), or by a key column.
	join *parityJoin
	// optional blocks may be left out of the table (counters list with no
	// targets).
	optional bool
	// footer, where set, are the keys of a table's last line: text below
	// the rows with no blank line between (bench hooks' note).
	footer string
	// starts, where set, is how the block's first line begins: a block
	// that begins otherwise is absent (latency's buckets, none without
	// runs).
	starts string
}

// parityJoin matches a table row to the JSON row whose key at path reads
// as the row's cell in column; object set means the block's JSON is an
// object keyed by the cell.
type parityJoin struct {
	column, path string
	object       bool
	prefix       string // before the cell in the JSON ("stat/" before stat's program)
}

// zeroCell reads as a zero value ("0", "0 B", "0.00%", "0 ns", "false",
// "x0.00"), which a JSON key with omitempty leaves out.
var zeroCell = regexp.MustCompile(`^(x?0+(\.0+)?( ?[a-zµA-Z]+|%)?|false)$`)

func TestJSONParity(t *testing.T) {
	privtest.Root(t)
	privtest.Tracefs(t) // the getppid tracepoint that gives hooks a row
	start := time.Now()
	const window = 4 * time.Second
	hotName, ctrName, tpName, regName := uniqueName("par_hot"), uniqueName("par_ctr"), uniqueName("par_tp"), uniqueName("par_reg")
	// Continuous profiling in 1 s windows for triggers, hooks, the
	// profile list and the sampled counters; a short regressions window
	// so that one finding is made in the test's time; a counters target.
	// Stats stay on (no budget): the spinning program would take them
	// past the default budget, and the regression is found in counts
	// taken while they are on.
	d := startDaemon(t, t.TempDir(), "--profile.every", "1s", "--profile.duration", "1s", "--profile.hz", "999",
		"--maps.every", "200ms", "--regressions.window", window.String(), "--counters.programs", ctrName, "--stats.budget", "0")

	// A regression: the same program, paced, ten times slower after a
	// reload, so that the finding stands out of a busy host's noise.
	old := loop(t, regName, 200)
	stopOld, oldSince := pace(t, old, 100), time.Now()
	hotID, _ := hotProgram(t, hotName)
	tp := privtest.GetppidTracepoint(t, tpName, 1)
	tpID := progID(t, tp)
	driver := privtest.MakeCgroup(t, "bpfperf-parity.scope").Getppid(t, 2_000_000)
	t.Cleanup(func() { driver.Process.Kill(); driver.Wait() })
	ctr := loadBTFTarget(t, ctrName, 10)
	if err := privtest.Run(ctr, 3); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "par_map", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	for k := range uint32(5) {
		if err := m.Put(k, uint64(k)); err != nil {
			t.Fatal(err)
		}
	}
	mapID := mapIDOf(t, m)
	// A bench run for bench runs.
	d.cli(t, slices.Concat(benchArgs, []string{"--store"})...)

	time.Sleep(window + time.Second - time.Since(oldSince)) // a window of the old version
	stopNew := pace(t, loop(t, regName, 2000), 100)
	t.Cleanup(stopNew)
	stopOld()
	oldID := progID(t, old)
	old.Close()

	st := calibrated(t, d)
	latency := st.Latency.Available
	if latency {
		d.cli(t, "latency", hotName, "-d", "300ms") // a window for show and history --latency
	} else {
		t.Logf("latency views left out: %s", st.Latency.Reason)
	}
	// Wait until every view has rows to compare.
	var found []api.Regression
	for deadline := time.Now().Add(30 * time.Second); d.query(&found, "regressions", "--since", "1h", "--prog", regName) != nil || len(found) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no regression of %s in 30 s; its events:\n%s", regName, d.cli(t, "events", "--prog", regName, "--since", "1h"))
		}
		time.Sleep(250 * time.Millisecond)
	}
	eventuallyWithin(t, 30*time.Second, "hooks of "+tpName, func() bool {
		var h api.Hooks
		return d.query(&h, "hooks", strconv.Itoa(int(tpID))) == nil && len(h.Rows) > 0
	})
	eventuallyWithin(t, 30*time.Second, "triggers of "+hotName, func() bool {
		var tr api.Triggers
		return d.query(&tr, "triggers", strconv.Itoa(int(hotID))) == nil && len(tr.Rows) > 0
	})
	eventuallyWithin(t, 30*time.Second, "a sampled counters window of "+hotName, func() bool {
		var pts []any
		return d.query(&pts, "counters", "history", hotName) == nil && len(pts) > 0
	})
	since, until := start.Add(-time.Minute).Format(time.RFC3339Nano), time.Now().Format(time.RFC3339Nano)
	rng := []string{"--since", since, "--until", until}
	id, tpRef, mapRef := strconv.Itoa(int(hotID)), strconv.Itoa(int(tpID)), strconv.Itoa(int(mapID))

	views := []parityView{
		{name: "status", args: []string{"status"}, blocks: []parityBlock{{kind: fieldsBlock, keys: statusKeys}}},
		{name: "progs", args: []string{"progs"}, blocks: []parityBlock{{json: "", keys: progsKeys, join: &parityJoin{column: "ID", path: "id"}}}},
		{name: "progs --all", args: []string{"progs", "--all"}, blocks: []parityBlock{{keys: progsKeys, join: &parityJoin{column: "ID", path: "id"}}}},
		{name: "progs --group name", args: []string{"progs", "--group", "name"}, blocks: []parityBlock{{keys: progsKeys, join: &parityJoin{column: "NAME", path: "name"}}}},
		{name: "progs --counters", args: []string{"progs", "--counters"}, blocks: []parityBlock{{keys: progsCountersKeys, join: &parityJoin{column: "ID", path: "id"}}}},
		{name: "show", args: []string{"show", id}, blocks: []parityBlock{{kind: fieldsBlock, keys: showKeys, why: showWhy}}},
		{name: "show (attached)", args: []string{"show", tpRef}, blocks: []parityBlock{{kind: fieldsBlock, keys: showKeys, why: showWhy}}},
		{name: "show (unloaded)", args: []string{"show", strconv.Itoa(int(oldID))}, blocks: []parityBlock{{kind: fieldsBlock, keys: showKeys, why: showWhy}}},
		{name: "history", args: slices.Concat([]string{"history", id}, rng), blocks: []parityBlock{{keys: historyKeys}}},
		{name: "history --step", args: slices.Concat([]string{"history", id, "--step", "2s"}, rng), blocks: []parityBlock{{keys: historyKeys}}},
		{name: "history --counters", args: slices.Concat([]string{"history", hotName, "--counters"}, rng), blocks: []parityBlock{{keys: countersHistoryKeys}}},
		{name: "counters history", args: slices.Concat([]string{"counters", "history", hotName}, rng), blocks: []parityBlock{{keys: countersHistoryKeys}}},
		{name: "history --map", args: slices.Concat([]string{"history", "--map", mapRef}, rng), blocks: []parityBlock{{keys: mapPointKeys}}},
		{name: "events", args: slices.Concat([]string{"events"}, rng), blocks: []parityBlock{{keys: eventsKeys}}},
		{name: "owners", args: []string{"owners"}, blocks: []parityBlock{{json: "owners", keys: ownersKeys, join: &parityJoin{column: "OWNER", path: "owner"}}}},
		{name: "owners --since", args: []string{"owners", "--since", "10m"}, blocks: []parityBlock{{json: "owners", keys: ownersKeys, join: &parityJoin{column: "OWNER", path: "owner"}}}},
		{name: "owners --triggered", args: slices.Concat([]string{"owners", "--triggered"}, rng), blocks: []parityBlock{{keys: workloadsKeys}}},
		{name: "triggers", args: slices.Concat([]string{"triggers"}, rng), blocks: []parityBlock{{json: "rows", keys: triggersKeys}}},
		{name: "hooks", args: slices.Concat([]string{"hooks"}, rng), blocks: []parityBlock{{json: "rows", keys: hooksKeys}}},
		{name: "maps", args: []string{"maps"}, blocks: []parityBlock{{json: "maps", keys: mapsKeys, join: &parityJoin{column: "ID", path: "id"}}}},
		{name: "maps --all", args: []string{"maps", "--all"}, blocks: []parityBlock{{json: "maps", keys: mapsKeys, join: &parityJoin{column: "ID", path: "id"}}}},
		{name: "maps show", args: slices.Concat([]string{"maps", "show", mapRef}, rng), blocks: []parityBlock{{kind: fieldsBlock, keys: mapShowKeys}, {json: "points", keys: mapPointKeys}}},
		{name: "counters list", args: []string{"counters", "list"}, blocks: []parityBlock{{kind: fieldsBlock, json: "status", keys: countersStatusKeys}, {json: "targets", keys: counterTargetKeys, join: &parityJoin{column: "ID", path: "id"}, optional: true}}},
		{name: "profile list", args: slices.Concat([]string{"profile", "list"}, rng), blocks: []parityBlock{{keys: profilesKeys}}},
		{name: "bench runs", args: []string{"bench", "runs", "--since", since}, blocks: []parityBlock{{keys: benchRunsKeys}}},
		{name: "regressions", args: slices.Concat([]string{"regressions"}, rng), blocks: []parityBlock{{keys: regressionsKeys}}},
		{name: "store stats", args: []string{"store", "stats"}, blocks: []parityBlock{{json: "resolutions", keys: storeStatsKeys, join: &parityJoin{column: "RESOLUTION", object: true}}}},
		{name: "top --once", args: []string{"top", "--once", "-d", "300ms"}, blocks: []parityBlock{{kind: lineBlock, keys: topSummaryKeys}, {json: "programs", keys: topKeys, join: &parityJoin{column: "ID", path: "id"}}}},
	}
	// The bench views, run small: what CI's make test can afford.
	views = append(views,
		parityView{name: "bench", args: benchArgs, blocks: benchBlocks},
		parityView{name: "bench get", args: []string{"bench", "get", "last"}, blocks: benchBlocks},
		parityView{name: "bench compare", args: []string{"bench", "compare", "last", "last"}, blocks: []parityBlock{
			{json: "deltas", keys: benchCompareKeys, join: &parityJoin{column: "test", path: "test"}},
		}},
		parityView{name: "bench hooks", args: []string{"bench", "hooks", "--hook", "tracepoint", "--rounds", "3", "--syscalls", "20000"}, blocks: []parityBlock{
			{keys: benchHooksKeys, join: &parityJoin{column: "HOOK", path: "hook"}, footer: "rounds,events_per_round,event"},
		}},
		parityView{name: "stat", args: []string{"stat", "--duration", "500ms"}, blocks: []parityBlock{
			{kind: lineBlock, keys: map[string]string{"": "macro.runs,macro.wall_seconds,macro.interval_ms,macro.source"}},
			{kind: lineBlock, keys: map[string]string{"": "fingerprint.kernel,fingerprint.cpus,fingerprint.cpu_model,fingerprint.stats"}},
			{json: "results", keys: statKeys, join: &parityJoin{column: "program", path: "name", prefix: "stat/"}},
			{kind: textBlock, keys: map[string]string{"": ""}}, // what the columns mean
		}},
		parityView{name: "store check", args: []string{"store", "check"}, blocks: []parityBlock{{kind: textBlock, keys: map[string]string{"": "ok,problems"}}}},
	)
	if latency {
		views = append(views, latencyViews(id, rng)...)
	}
	walk := time.Now()
	for _, v := range views {
		checkParity(t, d, v)
	}
	t.Logf("set-up %v, %d views %v", walk.Sub(start).Round(time.Millisecond), len(views), time.Since(walk).Round(time.Millisecond))
}

// latencyViews are the views of a latency window (they need fentry).
func latencyViews(id string, rng []string) []parityView {
	return []parityView{
		{name: "latency", args: []string{"latency", id, "-d", "300ms"}, blocks: []parityBlock{
			{json: "", keys: latencyKeys, join: &parityJoin{column: "ID", path: "id"}},
			{kind: textBlock, keys: map[string]string{"": "buckets"}, starts: "[", optional: true},
			{kind: textBlock, keys: map[string]string{"": "runs,duration_s,stopped,floor_ns,error_pct,added_ns_per_run,per_run|per_run_unavailable"}},
		}},
		{name: "history --latency", args: slices.Concat([]string{"history", id, "--latency"}, rng), blocks: []parityBlock{{keys: latencyKeys}}},
	}
}

// TestJSONParityFentry is TestJSONParity for what needs fentry/fexit: the
// latency views, show with a latency window, and counters enable's line
// and target (disable prints the same line, renderTarget).
func TestJSONParityFentry(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs fentry/fexit: runs in the VM (TestDaemonInVM)")
	}
	privtest.Root(t)
	start := time.Now()
	d := startDaemon(t, t.TempDir(), "--profile.every", "0")
	name := uniqueName("parf")
	prog := loadBTFTarget(t, name, 100) // fentry needs the target's BTF
	id := strconv.Itoa(int(progID(t, prog)))
	if st := calibrated(t, d); !st.Latency.Available {
		t.Fatalf("latency unavailable in the VM: %s", st.Latency.Reason)
	}
	// The program runs only while a window is open, never while a
	// trampoline is attached to it: under qemu's emulation that race
	// takes an int3 Oops in the guest (docs/testing.md). The latency
	// views run again below with no runs: their figures read zero.
	waitShown(t, d, name)
	if res := latencyWhile(t, d, func() {
		if err := privtest.Run(prog, 300); err != nil {
			t.Fatal(err)
		}
	}, id, "--duration", "1s"); res.code != 0 {
		t.Fatalf("bpfperf latency: exit %d: %s", res.code, res.errOut)
	}
	d.cli(t, "counters", "enable", id)
	rng := []string{"--since", start.Add(-time.Minute).Format(time.RFC3339Nano), "--until", time.Now().Format(time.RFC3339Nano)}
	views := append(latencyViews(id, rng),
		parityView{name: "show", args: []string{"show", id}, blocks: []parityBlock{{kind: fieldsBlock, keys: showKeys, why: showWhy}}},
		parityView{name: "counters enable", args: []string{"counters", "enable", id}, blocks: []parityBlock{
			{kind: lineBlock, keys: map[string]string{"": "name,id,source,state,window_ms"}},
		}},
		parityView{name: "counters list", args: []string{"counters", "list"}, blocks: []parityBlock{
			{kind: fieldsBlock, json: "status", keys: countersStatusKeys},
			{json: "targets", keys: counterTargetKeys, join: &parityJoin{column: "ID", path: "id"}},
		}},
	)
	for _, v := range views {
		checkParity(t, d, v)
	}
}

// checkParity runs v with -o table and -o json and reports each value the
// table shows that the JSON lacks. Live views move between the calls (a
// program's sampled window comes and goes, top's rates are its own two
// readings), so the JSON is read before and after the table, a value
// counts as missing only where both lack it, and a view that fails is
// run again, twice at most: a key the JSON never has fails every time.
func checkParity(t *testing.T, d *daemonProc, v parityView) {
	t.Helper()
	var problems []string
	ranged := slices.Contains(v.args, "--until") // the same answer every call
	for range 3 {
		var before, after any
		d.json(t, &before, v.args...)
		text := d.cli(t, append(slices.Clone(v.args), "-o", "table")...)
		if after = before; !ranged {
			d.json(t, &after, v.args...)
		}
		p1, compared := compareParity(v, text, before)
		p2, _ := compareParity(v, text, after)
		problems = slices.DeleteFunc(p1, func(p string) bool { return !slices.Contains(p2, p) })
		if len(problems) == 0 {
			t.Logf("%s: %d values compared", v.name, compared)
			return
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// compareParity checks the table output text of view v against its JSON
// document: the problems found, and how many values it compared.
func compareParity(v parityView, text string, doc any) (problems []string, compared int) {
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for bi, b := range v.blocks {
		for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
			lines = lines[1:]
		}
		var block []string
		if b.kind == lineBlock {
			block, lines = lines[:min(1, len(lines))], lines[min(1, len(lines)):]
		} else {
			end := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "" })
			if end < 0 || (b.kind == textBlock && bi == len(v.blocks)-1) {
				end = len(lines)
			}
			block, lines = lines[:end], lines[end:]
		}
		if b.starts != "" && (len(block) == 0 || !strings.HasPrefix(block[0], b.starts)) {
			lines = append(block, lines...)
			block = nil
		}
		if len(block) == 0 {
			if !b.optional {
				errorf("%s: block %d missing from the table:\n%s", v.name, bi, text)
			}
			continue
		}
		if b.optional && b.kind == tableBlock && !strings.Contains(block[0], "  ") {
			continue // a sentence in the table's place: nothing listed
		}
		at := lookup(doc, b.json)
		where := v.name + " -o json" + cond(b.json != "", " ."+b.json, "")
		cell := func(what, value string, obj any, where string, keys *string, why string) {
			if p := checkCell(v.name, what, value, obj, where, keys, why); p != nil {
				problems = append(problems, p...)
			}
			if value != "" && value != "-" {
				compared++
			}
		}
		switch b.kind {
		case fieldsBlock:
			for _, l := range block {
				field, value, ok := strings.Cut(l, ":")
				if !ok {
					errorf("%s: %q is not a field line", v.name, l)
					continue
				}
				cell("field "+strconv.Quote(field), strings.TrimSpace(value), at, where, b.keysOf(field), b.why[field])
			}
		case textBlock, lineBlock:
			cell("text "+strconv.Quote(block[0]), strings.Join(block, " "), at, where, b.keysOf(""), "")
		case tableBlock:
			if b.footer != "" {
				last := block[len(block)-1]
				cell("text "+strconv.Quote(last), last, at, where, &b.footer, "")
				block = block[:len(block)-1]
			}
			header, rows := splitColumns(block)
			var arr []any
			if one, ok := at.(map[string]any); ok && b.join != nil && !b.join.object {
				arr = []any{one} // a view of one row (latency)
			} else if !b.joinObject() {
				if arr, ok = at.([]any); !ok {
					errorf("%s: %s is %T, not a list of rows", v.name, where, at)
					continue
				}
				if b.join == nil && len(arr) != len(rows) {
					errorf("%s: the table has %d rows, %s %d", v.name, len(rows), where, len(arr))
					continue
				}
			}
			joined := 0
			for i, row := range rows {
				jrow, ok := b.rowOf(at, arr, i, header, row)
				if !ok {
					continue // a row that came or went between the calls
				}
				joined++
				for c, h := range header {
					cell(fmt.Sprintf("row %d column %q", i, h), row[c], jrow, where+" (its row)", b.keysOf(h), "")
				}
			}
			if joined == 0 {
				errorf("%s: no table row found in the JSON (%d rows):\n%s", v.name, len(rows), text)
			}
		}
	}
	if compared == 0 {
		errorf("%s: nothing shown to compare:\n%s", v.name, text)
	}
	return problems, compared
}

// checkCell checks one shown value against the JSON.
func checkCell(view, what, cell string, obj any, where string, keys *string, why string) (problems []string) {
	if keys == nil {
		return []string{fmt.Sprintf("%s: %s (%q) has no JSON key in this test's mapping: name the key that carries it, adding it to the JSON if there is none", view, what, cell)}
	}
	switch {
	case cell == "" || cell == "-":
		return nil // nothing shown
	case strings.HasPrefix(cell, "- ("):
		if why != "" && !has(obj, why) {
			problems = append(problems, fmt.Sprintf("%s: %s says why it has no value (%q); %s has no %s", view, what, cell, where, why))
		}
		return problems
	}
	for _, k := range strings.Split(*keys, ",") {
		if k == "" {
			continue
		}
		alts := strings.Split(k, "|")
		if !slices.ContainsFunc(alts, func(p string) bool { return has(obj, p) }) && !zeroCell.MatchString(cell) {
			problems = append(problems, fmt.Sprintf("%s: %s shows %q; %s has no %s", view, what, cell, where, k))
		}
	}
	return problems
}

func (b parityBlock) keysOf(name string) *string {
	if k, ok := b.keys[name]; ok {
		return &k
	}
	for pat, k := range b.keys {
		if p, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(name, p) {
			return &k
		}
	}
	return nil
}

func (b parityBlock) joinObject() bool { return b.join != nil && b.join.object }

// rowOf is the JSON row of table row i.
func (b parityBlock) rowOf(at any, arr []any, i int, header, row []string) (any, bool) {
	if b.join == nil {
		return arr[i], true
	}
	col := slices.Index(header, b.join.column)
	if col < 0 {
		return nil, false
	}
	if b.join.object {
		m, _ := at.(map[string]any)
		v, ok := m[row[col]]
		return v, ok
	}
	for _, r := range arr {
		if jsonText(lookup(r, b.join.path)) == b.join.prefix+row[col] {
			return r, true
		}
	}
	return nil, false
}

// splitColumns cuts a tabwriter table into cells: at runs of two or more
// spaces where a line has as many cells as the header (right-aligned
// columns), else at the columns where the header's titles start (an empty
// cell; an untitled column, whose cells go to the column before it). A
// header line that ends in spaces has one more column, untitled ("").
func splitColumns(block []string) (header []string, rows [][]string) {
	h := []rune(block[0])
	var starts []int
	for i := range h {
		if h[i] != ' ' && (i == 0 || (h[i-1] == ' ' && (i < 2 || h[i-2] == ' '))) {
			starts = append(starts, i)
		}
	}
	if len(h) > 0 && h[len(h)-1] == ' ' {
		starts = append(starts, len(h))
	}
	cut := func(line []rune) []string {
		cells := make([]string, len(starts))
		for i, s := range starts {
			e := len(line)
			if i+1 < len(starts) {
				e = min(starts[i+1], len(line))
			}
			if s < e {
				cells[i] = strings.TrimSpace(string(line[s:e]))
			}
		}
		return cells
	}
	gaps := regexp.MustCompile(`\s{2,}`)
	header = cut(h)
	for _, l := range block[1:] {
		if cells := gaps.Split(strings.TrimSpace(l), -1); len(cells) == len(header) && header[len(header)-1] != "" {
			rows = append(rows, cells)
			continue
		}
		rows = append(rows, cut([]rune(l)))
	}
	// An untitled last column with nothing in it is a header's trailing
	// tab, not a column.
	if last := len(header) - 1; last > 0 && header[last] == "" && !slices.ContainsFunc(rows, func(r []string) bool { return r[last] != "" }) {
		header = header[:last]
		for i := range rows {
			rows[i] = rows[i][:last]
		}
	}
	return header, rows
}

// lookup walks a decoded document by dotted keys; nil if absent.
func lookup(v any, path string) any {
	if path == "" {
		return v
	}
	for _, k := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// has says whether path leads to a value that is not null; through a
// list, in any of its elements.
func has(v any, path string) bool {
	if path == "" {
		return v != nil
	}
	k, rest, _ := strings.Cut(path, ".")
	switch x := v.(type) {
	case map[string]any:
		return has(x[k], rest) && x[k] != nil
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return has(e, path) })
	}
	return false
}

func jsonText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func cond(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

func mapIDOf(t *testing.T, m *ebpf.Map) uint32 {
	t.Helper()
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, ok := info.ID()
	if !ok {
		t.Fatal("map info has no id")
	}
	return uint32(id)
}

// The mappings: each view's headers and fields to the JSON keys that
// carry them.
var (
	progsKeys = map[string]string{
		"ID": "id", "TYPE": "type", "NAME": "name", "WHERE": "where", "TAG": "tag",
		"RUNS/S": "runs_per_sec", "AVG/RUN": "avg_ns_per_run", "CPU%": "cpu_percent", "SAMPLED%": "sampled_cpu_percent",
		"RUN_CNT": "run_cnt", "RUN_TIME_NS": "run_time_ns", "STATE": "loaded,unloaded_at|loaded",
		"POD": "k8s.namespace,k8s.pod,k8s.container",
	}
	perRunKeys = map[string]string{
		"MECHANISM": "mechanism", "COUNTED": "counted_runs", "SAMPLES": "samples", "CPU-CLOCK": "totals.cpu-clock",
		"CPU-CLOCK/RUN": "cpu_clock_ns_per_run", "CYCLES/RUN": "cycles_per_run", "INSNS/RUN": "instructions_per_run",
		"IPC": "ipc", "LLC-MISS/RUN": "llc_misses_per_run", "LLC-MISS/1K-INSNS": "llc_misses_per_1k_instructions",
	}
	progsCountersKeys = mergeKeys(prefixed(perRunKeys, "perf_counters."), map[string]string{
		"ID": "id", "TYPE": "type", "NAME": "name", "SAMPLED CPU%": "sampled_cpu_percent",
	})
	showKeys = map[string]string{
		"id": "id", "name": "name", "kernel_name": "kernel_name", "type": "type", "tag": "tag",
		"identity": "identity_id,identity", "state": "loaded,unloaded_at|loaded", "loaded_at": "meta.loaded_at",
		"uid": "meta.uid", "gpl_compatible": "meta.gpl_compatible", "bytes_xlated": "meta.bytes_xlated",
		"bytes_jited": "meta.bytes_jited", "bytes_memlock": "meta.bytes_memlock", "verified_insns": "meta.verified_insns",
		"btf_id": "meta.btf_id", "map_ids": "meta.map_ids", "pod": "k8s.namespace,k8s.pod,k8s.container,k8s.workload,k8s.pod_uid",
		"attach": "meta.attach.type,meta.attach.target,meta.attach.link_id|meta.attach.type",
		"loader": "meta.loader.comm,meta.loader.pid,meta.loader.at", "pin": "meta.pin", "pids": "meta.pids.comm,meta.pids.pid",
		"run_cnt": "run_cnt", "run_time_ns": "run_time_ns", "recursion_misses": "recursion_misses",
		"links_missed": "meta.attach.missed", "runs/s": "runs_per_sec", "avg/run": "avg_ns_per_run",
		"avg/run since load": "avg_ns_per_run_since_load", "cpu": "cpu_percent", "sampled cpu": "sampled_cpu_percent",
		"counters": "perf_counters.mechanism,perf_counters.events", "counters window": "perf_counters.window_start,perf_counters.window_end",
		"counted runs": "perf_counters.counted_runs", "samples": "perf_counters.samples",
		"cpu-clock in window": "perf_counters.totals.cpu-clock", "cpu-clock/run": "perf_counters.cpu_clock_ns_per_run",
		"cycles/run": "perf_counters.cycles_per_run", "instructions/run": "perf_counters.instructions_per_run",
		"ipc": "perf_counters.ipc", "llc misses/run": "perf_counters.llc_misses_per_run",
		"llc misses/1k insns": "perf_counters.llc_misses_per_1k_instructions",
		"triggered by":        "triggered_by.rows.workload,triggered_by.rows.share",
		"hook overhead":       "hook_overhead.rows.hook,hook_overhead.rows.ns_per_run,hook_overhead.rows.run_time_ratio,hook_overhead.rows.programs",
		"latency":             "latency.p50_ns,latency.p99_ns,latency.p999_ns,latency.max_ns,latency.runs,latency.end",
	}
	showWhy    = map[string]string{"triggered by": "triggered_by_unavailable", "hook overhead": "hook_overhead_unavailable"}
	statusKeys = map[string]string{
		"version": "version", "pid": "pid", "uptime": "uptime_seconds", "stats mode": "stats_mode", "stats detail": "stats_detail",
		"interval": "interval_ms", "programs loaded": "programs_loaded", "programs seen": "programs_seen",
		"store": "store_path", "store size": "store_bytes", "last sample": "last_sample",
		"last sweep": "last_sweep_ms,last_sweep_read,programs_loaded", "last write": "last_write_ms",
		"daemon cpu": "cpu_percent,uptime_seconds", "daemon rss": "rss_bytes", "daemon heap": "heap_live_bytes",
		"stats duty": "stats_duty", "sweep": "sweep,sweep_detail", "loaders": "loaders", "holders": "holders", "pods": "pods",
		"sweep bpf cost":   "sweep_bpf_ms,sweep_bpf_cpu_percent",
		"profiling":        "profiling.continuous,profiling.hz,profiling.event,profiling.window_ms,profiling.every_ms,profiling.stored_profiles",
		"profile filter":   "profiling.filter.on,profiling.filter.reason|profiling.filter.on,profiling.filter.passed,profiling.filter.dropped,profiling.filter.pages",
		"profile wake-ups": "profiling.drains.timed,profiling.drains.full",
		"stats cost":       "stats_cost.detail|stats_cost.ns_per_run,stats_cost.runs_per_sec",
		"stats budget":     "stats_cost.budget",
		"counters":         "counters", "counters exact": "counters.exact.available", "counters sampled*": "counters.sampled.event,counters.sampled.available",
		"counters targets": "counters.targets,counters.max,counters.counting,counters.window_ms,counters.every_ms", "counters programs": "counters.programs",
		"latency": "latency.available", "skipped programs": "skipped_programs,skip_reason",
		"store damage": "store_damaged", "store gone": "store_gone", "last error": "last_error",
	}
	countersStatusKeys = func() map[string]string {
		m := map[string]string{}
		for k, v := range statusKeys {
			if p, ok := strings.CutPrefix(v, "counters."); ok && strings.HasPrefix(k, "counters ") {
				m[k] = strings.ReplaceAll(p, ",counters.", ",")
			}
		}
		return m
	}()
	historyKeys = map[string]string{
		"TIME": "time", "ID": "id", "RUNS/S": "runs_per_sec", "AVG/RUN": "avg_ns_per_run", "CPU%": "cpu_percent",
		"RUN_CNT": "run_cnt", "RUN_TIME_NS": "run_time_ns", "RECURSION_MISSES": "recursion_misses", "": "reload|estimated",
	}
	countersHistoryKeys = mergeKeys(perRunKeys, map[string]string{"WINDOW END": "window_end", "ID": "id"})
	mapPointKeys        = map[string]string{"TIME": "time", "ENTRIES": "entries", "FILL": "fill_percent", "MEMORY": "bytes_memlock"}
	eventsKeys          = map[string]string{"TIME": "time", "KIND": "kind", "ID": "id", "NAME": "name", "TAG": "tag", "DETAIL": "detail"}
	ownersKeys          = map[string]string{
		"OWNER": "owner", "UNIT/CONTAINER": "k8s.pod|container|unit", "PROGS": "programs", "RUNS/S": "runs_per_sec", "CPU%": "cpu_percent",
		"SAMPLED%": "sampled_cpu_percent", "MAPS": "maps", "MAP MEMORY": "map_bytes", "STATE": "present",
	}
	workloadsKeys = map[string]string{"WORKLOAD": "workload", "CONTEXT": "context", "PROGS": "programs", "SAMPLES": "samples", "CPU%": "cpu_percent", "PROGRAMS": "programs"}
	triggersKeys  = map[string]string{"ID": "prog_id", "PROGRAM": "prog_name", "WORKLOAD": "workload", "CONTEXT": "context", "SAMPLES": "samples", "CPU%": "cpu_percent", "SHARE": "share"}
	hooksKeys     = map[string]string{"HOOK": "hook", "SAMPLES": "samples", "CPU%": "cpu_percent", "NS/RUN": "ns_per_run", "VS RUN_TIME": "run_time_ratio", "PROGRAMS": "programs.name,programs.id"}
	mapsKeys      = map[string]string{
		"ID": "id", "TYPE": "type", "NAME": "name", "MAX": "max_entries", "ENTRIES": "entries,partial|entries", "FILL": "fill_percent",
		"MEMORY": "bytes_memlock,present,gone_at|bytes_memlock", "PROGS": "programs", "OWNER": "pids.comm,pids.pid|pids.pin",
	}
	mapShowKeys = map[string]string{
		"id": "id", "name": "name", "type": "type", "state": "present,read_at|gone_at", "flags": "flags", "bytes_key": "bytes_key",
		"bytes_value": "bytes_value", "max_entries": "max_entries", "entries": "entries", "fill": "fill_percent",
		"counted": "counted", "bytes_memlock": "bytes_memlock", "programs": "programs", "pids": "pids.comm,pids.pid|pids.pin",
		"readings": "points",
	}
	counterTargetKeys = mergeKeys(prefixed(perRunKeys, "last."), map[string]string{
		"ID": "id", "NAME": "name", "SOURCE": "source", "STATE": "state", "WINDOWS": "windows",
	})
	profilesKeys = map[string]string{
		"ID": "id", "START": "start", "DURATION": "duration_ns", "KIND": "kind", "EVENT": "event", "HZ": "hz", "SAMPLES": "samples", "SIZE": "bytes",
	}
	benchRunsKeys   = map[string]string{"ID": "id", "TIME": "time", "TESTS": "tests", "FAILED": "failed", "KERNEL": "kernel", "COMMIT": "git_commit", "LABEL": "label"}
	regressionsKeys = map[string]string{
		"ID": "id", "TIME": "time", "KIND": "kind", "PROGRAM": "program", "TAGS": "old_tag,new_tag", "NS/RUN": "before_ns_per_run,after_ns_per_run",
		"RATIO": "ratio", "95% CI": "ratio_lo,ratio_hi", "P": "p", "N": "n_before,n_after", "P99": "tail.ratio,by|tail.ratio",
	}
	storeStatsKeys = map[string]string{"RESOLUTION": "", "SERIES": "series", "CHUNKS": "chunks", "SAMPLES": "samples", "BYTES": "bytes", "BYTES/SAMPLE": "bytes_per_sample"}
	latencyKeys    = map[string]string{
		"WINDOW END": "end", "ID": "id", "NAME": "name", "RUNS": "runs", "MEAN": "mean_ns", "P50": "p50_ns", "P90": "p90_ns",
		"P99": "p99_ns", "P99.9": "p999_ns", "MAX": "max_ns", "UNTIMED": "untimed",
	}
	topSummaryKeys = map[string]string{"": "host,kernel,stats_mode,bpf_cpu_percent,daemon.cpu_percent,daemon.rss_bytes,programs"}
	topKeys        = map[string]string{
		"ID": "id", "TYPE": "type", "NAME": "name", "RUNS/S": "runs_per_sec", "AVG/RUN": "avg_ns_per_run", "CPU%": "cpu_percent",
		"AVG/LOAD": "avg_ns_per_run_since_load", "SMPL%": "sampled_cpu_percent", "CYC/RUN": "cycles_per_run", "IPC": "ipc",
		"MAPS": "map_bytes", "OWNER": "pids.comm", "ATTACH": "attach.type",
	}
)

var (
	benchBlocks = []parityBlock{
		{kind: lineBlock, keys: map[string]string{"": "fingerprint.kernel,fingerprint.cpus,fingerprint.cpu_model,fingerprint.jit,fingerprint.stats"}},
		{kind: lineBlock, keys: map[string]string{"": "config.measures,config.target_ms|config.repeat,wall_seconds"}},
		{json: "results", keys: benchKeys, join: &parityJoin{column: "test", path: "name"}},
	}
	benchKeys = map[string]string{
		"test": "name", "median ns": "summary.median_ns", "mean": "summary.mean_ns", "min": "summary.min_ns", "max": "summary.max_ns",
		"IQR": "summary.iqr_ns", "stddev": "summary.stddev_ns", "CV": "summary.cv", "repeat": "repeat",
	}
	benchCompareKeys = map[string]string{
		"test": "test", "base ns": "base_ns,base_ci", "new ns": "new_ns,new_ci", "delta": "delta_pct,significant,p,n_base,n_new",
	}
	benchHooksKeys = map[string]string{
		"HOOK": "hook", "EVENT": "event", "WITHOUT": "without_ns.median_ns", "COST (STATS OFF)": "cost_ns.median_ns,cost_ns.iqr_ns,stats_held",
		"COST (STATS ON)": "cost_stats_ns.median_ns,cost_stats_ns.iqr_ns", "RUN_TIME": "run_ns.median_ns",
		"OUTSIDE RUN_TIME": "outside_run_time_ns.median_ns,outside_run_time_ns.iqr_ns", "RUNS/EVENT": "runs_per_event",
	}
	statKeys = map[string]string{
		"program": "name,macro.type,macro.name", "id": "macro.ids", "runs": "macro.runs.median", "run time": "macro.run_time_ns.median",
		"ns/run": "summary.median_ns", "runs/s": "macro.runs_per_second.median", "CPU %": "macro.cpu_percent.median",
		"sampled %": "macro.sampled_cpu_percent.median", "misses": "macro.recursion_misses.median",
	}
)

func mergeKeys(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// prefixed puts prefix before every key of m's values.
func prefixed(m map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		var parts []string
		for _, all := range strings.Split(v, ",") {
			var alts []string
			for _, p := range strings.Split(all, "|") {
				alts = append(alts, prefix+p)
			}
			parts = append(parts, strings.Join(alts, "|"))
		}
		out[k] = strings.Join(parts, ",")
	}
	return out
}
