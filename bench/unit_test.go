package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{4, 1, 3, 2, 10})
	want := Summary{N: 5, Median: 3, Mean: 4, Min: 1, Max: 10, IQR: 2}
	if s.N != want.N || s.Median != want.Median || s.Mean != want.Mean || s.Min != want.Min || s.Max != want.Max || s.IQR != want.IQR {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	// sample stddev of 1,2,3,4,10: sqrt(50/4)
	if d := s.Stddev - 3.5355339; d > 1e-6 || d < -1e-6 {
		t.Fatalf("stddev = %v", s.Stddev)
	}
	if d := s.CV - s.Stddev/4; d != 0 {
		t.Fatalf("cv = %v", s.CV)
	}
	if z := Summarize(nil); z.N != 0 || z.CV != 0 {
		t.Fatalf("empty: %+v", z)
	}
	if one := Summarize([]float64{7}); one.Median != 7 || one.Stddev != 0 || one.IQR != 0 {
		t.Fatalf("one value: %+v", one)
	}
}

func TestKeySequence(t *testing.T) {
	for _, size := range MapSizes {
		for _, pat := range KeyPatterns {
			seq, err := KeySequence(pat, size)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := KeySequence(pat, size)
			if len(seq) != keySeqLen || !slicesEqual(seq, again) {
				t.Fatalf("%s/%d: not deterministic or wrong length", pat, size)
			}
			for _, k := range seq {
				if int(k) >= size {
					t.Fatalf("%s/%d: key %d out of range", pat, size, k)
				}
			}
		}
	}
	// Zipf concentrates on few keys, uniform does not.
	top := func(seq []uint32) int {
		n := map[uint32]int{}
		best := 0
		for _, k := range seq {
			n[k]++
			best = max(best, n[k])
		}
		return best
	}
	u, _ := KeySequence("uniform", 1<<16)
	z, _ := KeySequence("zipf", 1<<16)
	if top(z) < 10*top(u) {
		t.Fatalf("zipf hottest key %d times, uniform %d: not skewed", top(z), top(u))
	}
	if _, err := KeySequence("gauss", 10); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("unknown pattern: %v", err)
	}
}

func slicesEqual(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{Measures: 0, Target: time.Millisecond},
		{Measures: 10, Repeat: -1},
		{Measures: 10},
		{Measures: 10, Repeat: 1, CPUs: []int{1 << 20}},
	} {
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: %v, want ErrBadConfig", c, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestFingerprintFixture(t *testing.T) {
	fp := Env{ProcRoot: "testdata/proc", SysRoot: "testdata/sys", Version: "v1.2.3", Commit: "abc"}.Fingerprint()
	if fp.Kernel != "6.18.0-test" || fp.CPUModel != "Test CPU @ 2.00GHz" || fp.Tool != "v1.2.3" || fp.Commit != "abc" {
		t.Fatalf("fingerprint: %+v", fp)
	}
	if fp.JIT["bpf_jit_enable"] != "1" || fp.JIT["bpf_jit_harden"] != "2" {
		t.Fatalf("jit: %v", fp.JIT)
	}
	if fp.Vulnerabilities["spectre_v2"] != "Mitigation: Retpolines" || fp.Vulnerabilities["meltdown"] != "Not affected" {
		t.Fatalf("vulnerabilities: %v", fp.Vulnerabilities)
	}
	lines := strings.Join(fp.Lines(), "\n")
	for _, want := range []string{"kernel: 6.18.0-test", "bpf-jit-harden: 2", "vuln-spectre_v2: Mitigation: Retpolines", "bpf-stats: off"} {
		if !strings.Contains(lines, want) {
			t.Errorf("lines miss %q:\n%s", want, lines)
		}
	}
}

func TestSuiteNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	chains := 0
	for _, tt := range Suite() {
		if seen[tt.Name] {
			t.Errorf("duplicate test %s", tt.Name)
		}
		seen[tt.Name] = true
		if tt.Group == "tailcall" && tt.Name != "tailcall/limit" {
			chains++
		}
	}
	if chains != MaxTailCalls+1 {
		t.Fatalf("%d chain lengths, want 0..%d", chains, MaxTailCalls)
	}
	// 7 map kinds x 4 sizes x ops x 2 patterns + 2 keygen
	if !seen["maps/lpm_trie/delete_insert/size=1M/keys=zipf"] || !seen["maps/hash_of_maps/lookup/size=64K/keys=uniform"] {
		t.Fatal("map matrix incomplete")
	}
}

// fakeReport is a report with two tests of known measurements.
func fakeReport() *Report {
	ms := func(v ...float64) []CPURun { return []CPURun{{CPU: 0, Measurements: v, Summary: Summarize(v)}} }
	r := &Report{
		Time:        time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Fingerprint: Env{ProcRoot: "testdata/proc", SysRoot: "testdata/sys", Version: "v0"}.Fingerprint(),
		Config:      ReportConfig{Measures: 3, CPUs: []int{0}},
		Results: []Result{
			{Test: Test{Name: "baseline/xdp", Entry: "base_xdp"}, Repeat: 1000, Runs: ms(8, 9, 10)},
			{Test: Test{Name: "maps/hash/lookup/size=1K/keys=zipf", Entry: "hash_lookup"}, Repeat: 500, Runs: ms(20, 22, 21)},
			{Test: Test{Name: "baseline/syscall"}, Skipped: "no timing"},
		},
	}
	for i := range r.Results {
		r.Results[i].Summary = Summarize(r.Results[i].Measurements())
	}
	return r
}

func TestOutputs(t *testing.T) {
	rep := fakeReport()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, rep); err != nil {
		t.Fatal(err)
	}
	wantCSV := "timestamp,test,entry_point,avg_ns,cpu0_ns\n" +
		"2025-01-02T03:04:05Z,baseline/xdp,base_xdp,9.00,9.00\n" +
		"2025-01-02T03:04:05Z,maps/hash/lookup/size=1K/keys=zipf,hash_lookup,21.00,21.00\n"
	if buf.String() != wantCSV {
		t.Fatalf("csv:\n%s\nwant:\n%s", buf.String(), wantCSV)
	}

	buf.Reset()
	if err := WriteBMF(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var bmf map[string]map[string]map[string]float64
	if err := json.Unmarshal(buf.Bytes(), &bmf); err != nil {
		t.Fatal(err)
	}
	if l := bmf["baseline/xdp"]["latency"]; l["value"] != 9 || l["lower_value"] != 8 || l["upper_value"] != 10 || len(bmf) != 2 {
		t.Fatalf("bmf: %v", bmf)
	}

	// JSON and Go benchmark output both read back to the same samples.
	for _, format := range []string{"json", "gobench"} {
		buf.Reset()
		if err := Write(&buf, rep, format); err != nil {
			t.Fatal(err)
		}
		s, err := parseSamples(buf.Bytes(), format)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if len(s) != 2 || !floatsEqual(s["maps/hash/lookup/size=1K/keys=zipf"], []float64{20, 22, 21}) {
			t.Fatalf("%s round trip: %v", format, s)
		}
	}
	buf.Reset()
	if err := WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "baseline/syscall: skipped: no timing") {
		t.Fatalf("table:\n%s", buf.String())
	}
	if err := Write(&buf, rep, "xml"); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("unknown format: %v", err)
	}
}

func floatsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCompareSynthetic(t *testing.T) {
	base := Samples{"a": {10, 11, 10, 12, 10, 11, 10, 11, 12, 10}, "b": {50, 51, 50, 52, 50, 51, 50, 51, 52, 50}, "gone": {1}}
	cur := Samples{"a": {20, 22, 21, 20, 23, 21, 20, 22, 21, 20}, "b": {51, 50, 52, 50, 51, 50, 50, 51, 52, 50}, "new": {1}}
	c := Compare(base, cur)
	if len(c.Deltas) != 2 || c.Deltas[0].Test != "a" || c.Deltas[1].Test != "b" {
		t.Fatalf("deltas: %+v", c.Deltas)
	}
	a, b := c.Deltas[0], c.Deltas[1]
	if !a.Significant || a.Pct < 80 || a.Pct > 120 {
		t.Fatalf("2x slowdown: %+v", a)
	}
	if b.Significant {
		t.Fatalf("same distribution flagged: %+v", b)
	}
	if r := c.Regressions(50); len(r) != 1 || r[0].Test != "a" {
		t.Fatalf("regressions over 50%%: %+v", r)
	}
	if r := c.Regressions(150); len(r) != 0 {
		t.Fatalf("regressions over 150%%: %+v", r)
	}
	if len(c.OnlyOld) != 1 || len(c.OnlyNew) != 1 {
		t.Fatalf("only: %v %v", c.OnlyOld, c.OnlyNew)
	}
	var buf bytes.Buffer
	if err := WriteComparison(&buf, c); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^a .*\+\d+\.\d\d%`).MatchString(buf.String()) || !regexp.MustCompile(`(?m)^b .*~`).MatchString(buf.String()) {
		t.Fatalf("comparison table:\n%s", buf.String())
	}
}

func TestBadObjects(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "prog.o")
	os.WriteFile(text, []byte("int main() {}\n"), 0o600)
	if _, err := ObjectTest(Object{Path: text, Program: "x"}); !errors.Is(err, ErrNotELF) {
		t.Errorf("not an ELF: %v", err)
	}
	if _, err := ObjectTest(Object{Path: "maps_bpfel.o", Program: "nope"}); !errors.Is(err, ErrNoProgram) || !strings.Contains(err.Error(), "hash_lookup") {
		t.Errorf("missing program: %v", err)
	}
	_, err := ObjectTest(Object{Path: "baseline_bpfel.o", Program: "base_raw_tp"})
	if !errors.Is(err, ErrNoTestRun) || !strings.Contains(err.Error(), "supported: socket_filter, sched_cls") {
		t.Errorf("unsupported type: %v", err)
	}
	for name, body := range map[string]string{
		"too many": "maps:\n  array:\n    - {key: 0, value: 1}\n    - {key: 1, value: 2}\n",
		"key size": "maps:\n  hash:\n    - {key: \"0102030405\", value: 1}\n",
		"no map":   "maps:\n  nosuch:\n    - {key: 0, value: 1}\n",
		"too big":  "maps:\n  hash:\n    - {key: 4294967296, value: 1}\n",
	} {
		p := filepath.Join(dir, "init.yaml")
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := ObjectTest(Object{Path: "maps_bpfel.o", Program: "hash_lookup", MapInit: p}); !errors.Is(err, ErrMapInit) {
			t.Errorf("map-init %s: %v", name, err)
		}
	}
}

func TestLoadSuiteFile(t *testing.T) {
	dir := t.TempDir()
	obj, _ := os.ReadFile("maps_bpfel.o")
	os.WriteFile(filepath.Join(dir, "m.o"), obj, 0o600)
	os.WriteFile(filepath.Join(dir, "suite.yaml"), []byte("tests:\n  - name: mine/lookup\n    object: m.o\n    program: hash_lookup\n    want: 1\n"), 0o600)
	tests, err := LoadSuiteFile(filepath.Join(dir, "suite.yaml"))
	if err != nil || len(tests) != 1 || tests[0].Name != "mine/lookup" || tests[0].Entry != "hash_lookup" {
		t.Fatalf("suite: %+v %v", tests, err)
	}
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("tests:\n  - objekt: m.o\n"), 0o600)
	if _, err := LoadSuiteFile(filepath.Join(dir, "bad.yaml")); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("unknown field: %v", err)
	}
}

// counterReport is fakeReport with cycles and instructions counted per run
// for the two tests that ran, both XDP programs.
func counterReport() *Report {
	rep := fakeReport()
	rep.Config.Events = []string{"cycles", "instructions"}
	events := []map[string][]float64{
		{"cycles": {40, 42, 41}, "instructions": {100, 100, 100}},
		{"cycles": {140, 150, 145}, "instructions": {300, 302, 301}},
	}
	for i := range events {
		r := &rep.Results[i]
		r.progType = ebpf.XDP
		r.Runs[0].Events = events[i]
		r.Events = map[string]Summary{}
		for e, v := range events[i] {
			r.Events[e] = Summarize(v)
		}
	}
	netOfHarness(rep.Results)
	return rep
}

// Counted events: net of the empty program of the same hook, and in every
// output: table columns with IPC, CSV columns, BMF measures, Go benchmark
// units that read back as samples compare tests like ns.
func TestOutputsWithEvents(t *testing.T) {
	rep := counterReport()
	hash := rep.Results[1]
	if hash.EventsNet["cycles"] != 145-41 || hash.EventsNet["instructions"] != 301-100 {
		t.Errorf("net of baseline/xdp: %v", hash.EventsNet)
	}
	if ipc, ok := hash.IPC(); !ok || math.Abs(ipc-301.0/145) > 1e-9 {
		t.Errorf("IPC %v %v", ipc, ok)
	}
	var buf bytes.Buffer
	if err := WriteTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cycles/run", "instructions/run", "IPC", "145 (net 104)", "301 (net 201)", "2.08"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := WriteCSV(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(buf.String(), "\n"); lines[0] != "timestamp,test,entry_point,avg_ns,cpu0_ns,cycles_per_run,cycles_net_per_run,instructions_per_run,instructions_net_per_run" ||
		!strings.HasSuffix(lines[2], ",145.00,104.00,301.00,201.00") {
		t.Errorf("csv:\n%s", buf.String())
	}
	buf.Reset()
	if err := WriteBMF(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var bmf map[string]map[string]map[string]float64
	if err := json.Unmarshal(buf.Bytes(), &bmf); err != nil {
		t.Fatal(err)
	}
	if c := bmf["baseline/xdp"]["cycles"]; c["value"] != 41 || c["lower_value"] != 40 || c["upper_value"] != 42 {
		t.Errorf("bmf cycles: %v", bmf["baseline/xdp"])
	}
	for _, format := range []string{"json", "gobench"} {
		buf.Reset()
		if err := Write(&buf, rep, format); err != nil {
			t.Fatal(err)
		}
		s, err := parseSamples(buf.Bytes(), format)
		if err != nil {
			t.Fatal(err)
		}
		name := EventSample("maps/hash/lookup/size=1K/keys=zipf", "cycles")
		if !floatsEqual(s[name], []float64{140, 150, 145}) || len(s) != 6 {
			t.Errorf("%s round trip: %v", format, s)
		}
	}
	// compare sees a change in cycles per run like one in ns.
	name := EventSample("maps/hash/lookup/size=1K/keys=zipf", "cycles")
	base := Samples{name: {140, 150, 145, 141, 149, 144, 146, 143}}
	cur := Samples{name: {290, 300, 295, 291, 299, 294, 296, 293}}
	regs := CompareMin(base, cur, 5).Regressions(5)
	if len(regs) != 1 || regs[0].Test != name {
		t.Errorf("regressions %+v", regs)
	}
}
