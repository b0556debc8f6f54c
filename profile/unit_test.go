package profile

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestBadRate(t *testing.T) {
	for _, hz := range []int{-1, MaxHz + 1} {
		if _, err := NewSampler(SamplerConfig{Hz: hz}); !errors.Is(err, ErrBadRate) {
			t.Errorf("NewSampler(Hz: %d) = %v, want ErrBadRate", hz, err)
		}
	}
}

// TestBadDuration needs no privileges: duration checks come before any
// kernel work, so a sampler without events will do.
func TestBadDuration(t *testing.T) {
	s := fakeSampler(time.Second)
	for _, d := range []time.Duration{0, -time.Second, MinDuration - 1, time.Second + 1} {
		_, err := s.Capture(context.Background(), d)
		var de *DurationError
		if !errors.Is(err, ErrBadDuration) || !errors.As(err, &de) {
			t.Fatalf("Capture(%v) = %v, want ErrBadDuration", d, err)
		}
		if de.Duration != d || de.Min != MinDuration || de.Max != time.Second {
			t.Errorf("Capture(%v): %+v", d, de)
		}
	}
	if got := (&DurationError{Duration: 0, Min: MinDuration, Max: time.Minute}).Error(); got != "bad capture duration: 0s is not within 100ms..1m0s" {
		t.Errorf("message %q", got)
	}
}

// checkBusy starts a capture and checks that a second one, started while
// the first runs, fails with ErrBusy.
func checkBusy(t *testing.T, s *Sampler) {
	t.Helper()
	done := make(chan error)
	go func() {
		_, err := s.Capture(context.Background(), 300*time.Millisecond)
		done <- err
	}()
	privtest.WaitFor(t, "capture to start", s.busy.Load)
	if _, err := s.Capture(context.Background(), time.Second); !errors.Is(err, ErrBusy) {
		t.Errorf("second capture: %v, want ErrBusy", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("first capture: %v", err)
	}
}

func TestBusy(t *testing.T) {
	s := fakeSampler(time.Minute)
	checkBusy(t, s)
	// Once it ended, the next capture may run; a cancelled one returns
	// what it has with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := s.Capture(ctx, time.Second)
	if !errors.Is(err, context.Canceled) || c == nil {
		t.Errorf("cancelled capture: %v, %v", c, err)
	}
}

func TestClosed(t *testing.T) {
	s := fakeSampler(time.Minute)
	s.Close()
	if _, err := s.Capture(context.Background(), time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("capture after close: %v", err)
	}
}

// TestDecodeRecords decodes sample, lost and throttle records (the data
// after the header), shares identical stacks, reads the cgroup id after
// the call chain, and maps sample times onto CLOCK_BOOTTIME.
func TestDecodeRecords(t *testing.T) {
	ne := binary.NativeEndian
	sample := func(pid, tid, cpu uint32, tm, cgroup uint64, ips ...uint64) []byte {
		b := make([]byte, offIPs+8*len(ips)+8)
		ne.PutUint64(b[offIPs+8*len(ips):], cgroup)
		ne.PutUint64(b[offIP:], 0x401000)
		ne.PutUint32(b[offPID:], pid)
		ne.PutUint32(b[offTID:], tid)
		ne.PutUint64(b[offTime:], tm)
		ne.PutUint32(b[offCPU:], cpu)
		ne.PutUint64(b[offPeriod:], 10101010)
		ne.PutUint64(b[offNr:], uint64(len(ips)))
		for i, ip := range ips {
			ne.PutUint64(b[offIPs+8*i:], ip)
		}
		return b
	}
	lost := make([]byte, 16)
	ne.PutUint64(lost[8:], 7)
	kernel := uint64(1<<64 + unix.PERF_CONTEXT_KERNEL)
	d := newDecoder(t.TempDir())
	d.toBoot = 5000 // boottime ran 5 µs ahead of the monotonic sample clock
	d.cgroups = true
	var c Capture
	for _, rec := range []struct {
		typ  uint32
		data []byte
	}{
		{unix.PERF_RECORD_SAMPLE, sample(0, 0, 1, 100, 1, kernel, 0xffffffff81000105, 0xffffffff81000205)},
		{unix.PERF_RECORD_LOST, lost},
		{unix.PERF_RECORD_THROTTLE, make([]byte, 24)},
		{unix.PERF_RECORD_SAMPLE, sample(42, 43, 0, 200, 9876, kernel, 0xffffffffc0003010, 0xffffffff81000205)},
		{unix.PERF_RECORD_SAMPLE, sample(42, 43, 0, 300, 9876, kernel, 0xffffffffc0003010, 0xffffffff81000205)},
		{unix.PERF_RECORD_SAMPLE, sample(42, 44, 1, 400, 9877)}, // user mode: no kernel frames
		{unix.PERF_RECORD_SAMPLE, []byte{1, 2, 3}},              // truncated: dropped
	} {
		d.record(&c, rec.typ, rec.data)
	}
	got := c.Samples
	if c.Lost != 7 || c.Throttled != 1 {
		t.Errorf("lost %d, throttled %d; want 7, 1", c.Lost, c.Throttled)
	}
	want := []Sample{
		{Time: 5100, CPU: 1, Comm: "swapper", Cgroup: 1, Period: 10101010, Stack: []uint64{0xffffffff81000105, 0xffffffff81000205}},
		{Time: 5200, CPU: 0, PID: 42, TID: 43, Comm: "[exited]", Cgroup: 9876, Period: 10101010, Stack: []uint64{0xffffffffc0003010, 0xffffffff81000205}},
		{Time: 5300, CPU: 0, PID: 42, TID: 43, Comm: "[exited]", Cgroup: 9876, Period: 10101010, Stack: []uint64{0xffffffffc0003010, 0xffffffff81000205}},
		{Time: 5400, CPU: 1, PID: 42, TID: 44, Comm: "[exited]", Cgroup: 9877, Period: 10101010},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("samples:\n got %+v\nwant %+v", got, want)
	}
	if &got[1].Stack[0] != &got[2].Stack[0] {
		t.Error("identical stacks are not shared")
	}
	if len(d.fresh) != 3 {
		t.Errorf("%d distinct stacks, want 3", len(d.fresh))
	}
}

func TestKallsyms(t *testing.T) {
	sym := NewSymbolizer(SymbolizerConfig{ProcRoot: "testdata", KallsymsMaxAge: time.Hour})
	for _, tc := range []struct {
		addr       uint64
		name, mod  string
		bpf, found bool
	}{
		{0xffffffff81000100, "do_syscall_64", "", false, true},
		{0xffffffff8100023f, "bpf_test_run", "", false, true},
		{0xffffffff810002ff, "__sysvec_apic_timer_interrupt", "", false, true},
		{0xffffffff81ffffff, "__sys_bpf", "", false, true},
		{0xffffffffc0001010, "e1000_clean", "e1000", false, true},
		{0xffffffffc0002004, "bpf_dispatcher_xdp", "bpf", true, true},
		{0xffffffffc0003010, "bpf_prog_0123456789abcdef_from_kallsyms", "bpf", true, true},
		{0xffffffffc0f00000, "", "", false, false}, // far past the last symbol
		{0xffffffff80000000, "", "", false, false}, // before the first
	} {
		f := sym.Lookup(tc.addr, 0)
		if f.Func != tc.name || f.Module != tc.mod || f.BPF() != tc.bpf {
			t.Errorf("Lookup(%#x) = %+v; want %s [%s] bpf=%v", tc.addr, f, tc.name, tc.mod, tc.bpf)
		}
	}
	// A program known from kallsyms only: its tag and function, no id.
	if f := sym.Lookup(0xffffffffc0003010, 0); f.ProgTag != "0123456789abcdef" || f.ProgName != "from_kallsyms" || f.ProgID != 0 {
		t.Errorf("kallsyms-only program: %+v", f)
	}
	if f := sym.Lookup(0xffffffffc0002004, 0); f.ProgTag != "" || f.ProgName != "" {
		t.Errorf("dispatcher: %+v", f)
	}
	if _, err := readKallsyms("testdata/kallsyms-hidden"); !errors.Is(err, ErrAddressesHidden) {
		t.Errorf("hidden kallsyms: %v", err)
	}
}

// TestKallsymsHiddenReadOnce: kallsyms that hides its addresses is read
// once per KallsymsMaxAge, not at each lookup. Without CAP_SYSLOG (in a
// pod lacking it) every kernel frame of every sample read the file again,
// and a profile window never ended.
func TestKallsymsHiddenReadOnce(t *testing.T) {
	dir := t.TempDir()
	copyFile := func(from string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kallsyms"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("testdata/kallsyms-hidden")
	sym := NewSymbolizer(SymbolizerConfig{ProcRoot: dir, KallsymsMaxAge: time.Hour})
	if f := sym.Lookup(0xffffffff81000100, 0); f.Func != "" || !errors.Is(sym.KallsymsErr(), ErrAddressesHidden) {
		t.Errorf("hidden: %+v, %v", f, sym.KallsymsErr())
	}
	// Shown now, but not read again within the hour.
	copyFile("testdata/kallsyms")
	if f := sym.Lookup(0xffffffff81000100, 0); f.Func != "" {
		t.Errorf("kallsyms read again within KallsymsMaxAge: %+v", f)
	}
	sym.cfg.KallsymsMaxAge = time.Nanosecond
	if f := sym.Lookup(0xffffffff81000100, 0); f.Func != "do_syscall_64" || sym.KallsymsErr() != nil {
		t.Errorf("after KallsymsMaxAge: %+v, %v", f, sym.KallsymsErr())
	}
}

// fixtureSymbolizer knows the kallsyms fixture and one BPF program, 7,
// with two functions and line info, as Learn would have read them.
func fixtureSymbolizer(t testing.TB) *Symbolizer {
	sym := NewSymbolizer(SymbolizerConfig{ProcRoot: "testdata", KallsymsMaxAge: time.Hour})
	p := &program{id: 7, name: "xdp_main", tag: "a1b2c3d4e5f60718", loadTime: 50}
	main := &function{prog: p, start: 0xffffffffc0010000, end: 0xffffffffc0010100, name: "xdp_main",
		systemName: "bpf_prog_a1b2c3d4e5f60718_xdp_main", file: "./xdp.c", line: 10,
		lines: []lineAddr{{0xffffffffc0010000, "./xdp.c", 10}, {0xffffffffc0010040, "./xdp.c", 12}}}
	helper := &function{prog: p, start: 0xffffffffc0010100, end: 0xffffffffc0010180, name: "parse",
		systemName: "bpf_prog_a1b2c3d4e5f60718_parse", file: "./xdp.c", line: 3,
		lines: []lineAddr{{0xffffffffc0010100, "./xdp.c", 3}, {0xffffffffc0010120, "./xdp.c", 5}}}
	p.funcs = []*function{main, helper}
	sym.progs[7] = p
	sym.index = []*function{main, helper}
	sym.maxLen = 0x100
	return sym
}

func TestLookupBPF(t *testing.T) {
	sym := fixtureSymbolizer(t)
	f := sym.Lookup(0xffffffffc0010125, 0)
	want := Frame{Addr: 0xffffffffc0010125, Func: "parse", SystemName: "bpf_prog_a1b2c3d4e5f60718_parse",
		File: "./xdp.c", Line: 5, Module: "bpf", ProgID: 7, ProgName: "xdp_main", ProgTag: "a1b2c3d4e5f60718"}
	if f != want {
		t.Errorf("Lookup = %+v\nwant %+v", f, want)
	}
	if f := sym.Lookup(0xffffffffc001003f, 0); f.Func != "xdp_main" || f.Line != 10 {
		t.Errorf("Lookup main = %+v", f)
	}
	// A newer program got the same JIT address: samples before its load
	// time belong to the old one.
	p := &program{id: 9, name: "newer", tag: "ffffffffffffffff", loadTime: 1000}
	fn := &function{prog: p, start: 0xffffffffc0010100, end: 0xffffffffc0010200, name: "newer"}
	p.funcs = []*function{fn}
	sym.progs[9] = p
	sym.index = []*function{sym.index[0], sym.index[1], fn}
	if !sym.overlaps() {
		t.Error("overlap not seen")
	}
	if f := sym.Lookup(0xffffffffc0010125, 500); f.ProgID != 7 {
		t.Errorf("at 500: program %d, want 7", f.ProgID)
	}
	if f := sym.Lookup(0xffffffffc0010125, 2000); f.ProgID != 9 {
		t.Errorf("at 2000: program %d, want 9", f.ProgID)
	}
}

// fixtureCapture has, on the fixture symbolizer, 3 samples in parse (two
// of them identical), 1 in xdp_main, 1 kernel-only and 1 in user mode.
func fixtureCapture() *Capture {
	bpfStack := []uint64{0xffffffffc0010125, 0xffffffffc0010045, 0xffffffff81000205, 0xffffffff81000105}
	mainStack := []uint64{0xffffffffc0010010, 0xffffffff81000205}
	kernStack := []uint64{0xffffffff81000305, 0xffffffff81000105}
	const period = 10101010
	return &Capture{
		Event: perfevent.CPUClock, Hz: 99, Period: period, CPUs: 2,
		Start: time.Unix(1700000000, 0), Duration: 10 * time.Second,
		Samples: []Sample{
			{Time: 100, CPU: 0, PID: 10, TID: 10, Comm: "curl", Period: period, Stack: bpfStack},
			{Time: 101, CPU: 0, PID: 10, TID: 10, Comm: "curl", Period: period, Stack: bpfStack},
			{Time: 102, CPU: 1, PID: 0, TID: 0, Comm: "swapper", Period: period, Stack: bpfStack},
			{Time: 103, CPU: 1, PID: 0, TID: 0, Comm: "swapper", Period: period, Stack: mainStack},
			{Time: 104, CPU: 1, PID: 11, TID: 12, Comm: "bash", Period: period, Stack: kernStack},
			{Time: 105, CPU: 1, PID: 11, TID: 12, Comm: "bash", Period: period},
		},
	}
}

// flat renders a profile's samples as sorted "labels stack values" lines.
func flat(p *profile.Profile) []string {
	var out []string
	for _, s := range p.Sample {
		var keys []string
		for k, v := range s.Label {
			keys = append(keys, k+"="+strings.Join(v, ","))
		}
		sort.Strings(keys)
		var frames []string
		for _, l := range s.Location {
			for _, ln := range l.Line {
				fr := ln.Function.Name
				if ln.Line != 0 {
					fr += ":" + itoa(map[uint32]string{}, uint32(ln.Line))
				}
				frames = append(frames, fr)
			}
		}
		var vals []string
		for _, v := range s.Value {
			vals = append(vals, itoa64(v))
		}
		out = append(out, strings.Join(keys, " ")+" | "+strings.Join(frames, ";")+" | "+strings.Join(vals, " "))
	}
	sort.Strings(out)
	return out
}

func itoa64(v int64) string {
	if v < 0 {
		return "-" + itoa(map[uint32]string{}, uint32(-v))
	}
	return itoa(map[uint32]string{}, uint32(v))
}

func TestBuild(t *testing.T) {
	sym := fixtureSymbolizer(t)
	p, err := Build(fixtureCapture(), sym, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"comm=curl context=task cpu=0 pid=10 prog_id=7 prog_name=xdp_main prog_tag=a1b2c3d4e5f60718 | parse:5;xdp_main:12;bpf_test_run;do_syscall_64 | 2 20202020",
		"comm=swapper context=task cpu=1 pid=0 prog_id=7 prog_name=xdp_main prog_tag=a1b2c3d4e5f60718 | parse:5;xdp_main:12;bpf_test_run;do_syscall_64 | 1 10101010",
		"comm=swapper context=task cpu=1 pid=0 prog_id=7 prog_name=xdp_main prog_tag=a1b2c3d4e5f60718 | xdp_main:10;bpf_test_run | 1 10101010",
	}
	if got := flat(p); !reflect.DeepEqual(got, want) {
		t.Errorf("samples:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := p.SampleType; len(got) != 2 || *got[0] != (profile.ValueType{Type: "samples", Unit: "count"}) ||
		*got[1] != (profile.ValueType{Type: "cpu", Unit: "nanoseconds"}) {
		t.Errorf("sample types %v", got)
	}
	if p.Period != 10101010 || p.DurationNanos != 10e9 || p.TimeNanos != 1700000000e9 {
		t.Errorf("period %d, duration %d, time %d", p.Period, p.DurationNanos, p.TimeNanos)
	}
	if m := p.Mapping; len(m) != 2 || m[0].File != MappingBPF || m[1].File != MappingKernel ||
		m[0].Start != 0xffffffffc0010010 || m[0].Limit != 0xffffffffc0010126 {
		t.Errorf("mappings %v", m)
	}
	if want := "bpfperf: cpu-clock at 99 Hz on 2 CPUs; 6 samples, 4 with BPF frames, 1 in user mode, 0 lost, 0 throttled"; len(p.Comments) != 1 || p.Comments[0] != want {
		t.Errorf("comments %q", p.Comments)
	}
	for _, f := range p.Function {
		if f.Name == "parse" && (f.Filename != "xdp.c" || f.StartLine != 3 || f.SystemName != "bpf_prog_a1b2c3d4e5f60718_parse") {
			t.Errorf("function %+v", f)
		}
	}

	all, err := Build(fixtureCapture(), sym, BuildOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := flat(all); len(got) != 4 || got[0] != "comm=bash context=task cpu=1 pid=11 | __sys_bpf;do_syscall_64 | 1 10101010" {
		t.Errorf("all samples:\n%s", strings.Join(got, "\n"))
	}
	// One thread's samples, kernel frames without BPF included (bench
	// --profile): bash's kernel sample, not curl's or swapper's.
	own, err := Build(fixtureCapture(), sym, BuildOptions{All: true, Threads: []uint32{12}})
	if err != nil {
		t.Fatal(err)
	}
	if got := flat(own); len(got) != 1 || got[0] != "comm=bash context=task cpu=1 pid=11 | __sys_bpf;do_syscall_64 | 1 10101010" ||
		len(own.Comments) != 2 || own.Comments[1] != "bpfperf: threads [12] only: 4 samples of other threads left out" {
		t.Errorf("thread 12 only:\n%s\ncomments %q", strings.Join(got, "\n"), own.Comments)
	}

	// A program known from kallsyms only is labelled by tag and name.
	c := fixtureCapture()
	c.Samples = []Sample{{CPU: 0, PID: 5, Comm: "x", Period: 1, Stack: []uint64{0xffffffffc0003010, 0xffffffff81000205}}}
	ko, err := Build(c, sym, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := flat(ko); len(got) != 1 || got[0] != "comm=x context=task cpu=0 pid=5 prog_name=from_kallsyms prog_tag=0123456789abcdef | bpf_prog_0123456789abcdef_from_kallsyms;bpf_test_run | 1 1" {
		t.Errorf("kallsyms-only program: %q", got)
	}

	// Round trip: labels (cpu 0 and pid 0 too) and mappings survive.
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(flat(back), want) {
		t.Errorf("after round trip:\n%s", strings.Join(flat(back), "\n"))
	}
	shares, err := ProgramShares(back)
	if err != nil || len(shares) != 1 || math.Abs(shares[7]-100*4*10101010/10e9) > 1e-9 {
		t.Errorf("shares %v, %v", shares, err)
	}
}

// literal builds a tiny profile: one sample per stack of function names,
// valued n samples of 10 ms, labelled with prog_id.
func literal(duration int64, samples ...struct {
	stack []string
	prog  string
	n     int64
}) *profile.Profile {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        10e6,
		DurationNanos: duration,
		Mapping:       []*profile.Mapping{{ID: 1, File: MappingBPF, HasFunctions: true}},
	}
	funcs := map[string]*profile.Location{}
	for _, s := range samples {
		var locs []*profile.Location
		for _, name := range s.stack {
			l, ok := funcs[name]
			if !ok {
				fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name}
				p.Function = append(p.Function, fn)
				l = &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: p.Mapping[0], Line: []profile.Line{{Function: fn}}}
				p.Location = append(p.Location, l)
				funcs[name] = l
			}
			locs = append(locs, l)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{s.n, s.n * 10e6},
			Label: map[string][]string{LabelProgID: {s.prog}}})
	}
	return p
}

type lit = struct {
	stack []string
	prog  string
	n     int64
}

func TestMergeDiff(t *testing.T) {
	a := literal(10e9, lit{[]string{"parse", "main"}, "7", 3}, lit{[]string{"main"}, "7", 1})
	b := literal(20e9, lit{[]string{"parse", "main"}, "7", 1}, lit{[]string{"tail"}, "8", 2})
	if err := a.CheckValid(); err != nil {
		t.Fatal(err)
	}

	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"prog_id=7 | main | 1 10000000",
		"prog_id=7 | parse;main | 4 40000000",
		"prog_id=8 | tail | 2 20000000",
	}
	if got := flat(m); !reflect.DeepEqual(got, want) || m.DurationNanos != 30e9 {
		t.Errorf("merge:\n%s\nduration %d", strings.Join(got, "\n"), m.DurationNanos)
	}
	shares, _ := ProgramShares(m)
	if !reflect.DeepEqual(shares, map[uint32]float64{7: 100 * 50e6 / 30e9, 8: 100 * 20e6 / 30e9}) {
		t.Errorf("shares %v", shares)
	}

	d, err := Diff(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		"pprof::base=true prog_id=7 | main | -1 -10000000",
		"pprof::base=true prog_id=7 | parse;main | -3 -30000000",
		"prog_id=7 | parse;main | 1 10000000",
		"prog_id=8 | tail | 2 20000000",
	}
	if got := flat(d); !reflect.DeepEqual(got, want) {
		t.Errorf("diff:\n%s", strings.Join(got, "\n"))
	}
	if a.Sample[0].Value[0] != 3 || a.Sample[0].Label[BaseLabel] != nil {
		t.Error("Diff modified its base")
	}
	if _, err := Merge(); !errors.Is(err, ErrNoProfiles) {
		t.Errorf("Merge(): %v", err)
	}
	other := literal(1, lit{[]string{"x"}, "1", 1})
	other.SampleType[1].Type = "cycles"
	if _, err := Merge(a, other); err == nil {
		t.Error("merge of incompatible profiles: no error")
	}
	if _, err := ProgramShares(other); !errors.Is(err, ErrNoCPUValue) {
		t.Errorf("ProgramShares(cycles): %v", err)
	}
}

func TestParseNotProfile(t *testing.T) {
	for name, in := range map[string][]byte{
		"empty": nil,
		"text":  []byte("hello, this is not a profile\n"),
		"json":  []byte(`{"samples": []}`),
		"gzip garbage": func() []byte {
			b, _ := Marshal(literal(1, lit{[]string{"x"}, "1", 1}))
			return b[:len(b)/2]
		}(),
	} {
		if _, err := ParseData(in); !errors.Is(err, ErrNotProfile) {
			t.Errorf("%s: %v, want ErrNotProfile", name, err)
		}
	}
	b, err := Marshal(literal(1, lit{[]string{"x"}, "1", 1}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseData(b); err != nil {
		t.Errorf("valid profile: %v", err)
	}
}

// fakeSampler is a Sampler with no events: enough for the checks that come
// before any kernel work, without privileges.
func fakeSampler(max time.Duration) *Sampler {
	return &Sampler{cfg: SamplerConfig{Hz: DefaultHz, RingPages: defaultRingPages, MaxDuration: max}}
}

// fakeCgroups names cgroup 5 only.
type fakeCgroups map[uint64]string

func (f fakeCgroups) Path(id uint64) (string, bool) { p, ok := f[id]; return p, ok }

// TestBuildTriggers: a task-context sample is charged to the cgroup it
// interrupted (by path where the resolver knows it, by id where not); a
// sample whose program ran under net_rx_action is charged to the softirq
// and never to the interrupted task's cgroup, whatever that was; the
// generic softirq loop and an interrupt entry name their context too; a
// chain that stops at the program is of no known context.
// ProgramTriggers sums them per program, costliest first.
func TestBuildTriggers(t *testing.T) {
	sym := fixtureSymbolizer(t)
	const period = 1000
	task := []uint64{0xffffffffc0010125, 0xffffffffc0010045, 0xffffffff81000105}
	netRx := []uint64{0xffffffffc0010010, 0xffffffff81000245, 0xffffffff81000265, 0xffffffff81000105}
	softirq := []uint64{0xffffffffc0010010, 0xffffffff81000265}
	hardirq := []uint64{0xffffffffc0010010, 0xffffffff81000285}
	truncated := []uint64{0xffffffffc0010010} // the unwinder stopped at the program
	c := &Capture{Event: perfevent.CPUClock, Hz: 99, Period: period, CPUs: 1, Start: time.Unix(1700000000, 0), Duration: time.Second,
		Samples: []Sample{
			{PID: 10, TID: 10, Comm: "app", Cgroup: 5, Period: period, Stack: task},
			{PID: 10, TID: 10, Comm: "app", Cgroup: 5, Period: period, Stack: task},
			{PID: 10, TID: 10, Comm: "app", Cgroup: 5, Period: period, Stack: task},
			{PID: 11, TID: 11, Comm: "gone", Cgroup: 6, Period: period, Stack: task},
			{PID: 10, TID: 10, Comm: "app", Cgroup: 5, Period: period, Stack: netRx},
			{PID: 12, TID: 12, Comm: "other", Cgroup: 7, Period: period, Stack: netRx},
			{PID: 0, TID: 0, Comm: "swapper", Cgroup: 1, Period: period, Stack: softirq},
			{PID: 10, TID: 10, Comm: "app", Cgroup: 5, Period: period, Stack: hardirq},
			{PID: 10, TID: 10, Comm: "app", Cgroup: 5, Period: period, Stack: truncated},
		}}
	p, err := Build(c, sym, BuildOptions{Cgroups: fakeCgroups{5: "/system.slice/app.service"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ProgramTriggers(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32][]TriggerCost{7: {
		{Trigger{ContextTask, "/system.slice/app.service"}, 3, 3000},
		{Trigger{"softirq/net_rx", ""}, 2, 2000},
		{Trigger{ContextHardirq, ""}, 1, 1000},
		{Trigger{ContextSoftirq, ""}, 1, 1000},
		{Trigger{ContextTask, "id 6"}, 1, 1000},
		{Trigger{ContextUnknown, "/system.slice/app.service"}, 1, 1000},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("triggers:\n got %+v\nwant %+v", got, want)
	}
	if _, err := ProgramTriggers(&profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}}}); !errors.Is(err, ErrNoCPUValue) {
		t.Errorf("a profile without cpu values: %v", err)
	}
}

// TestHookOf names the hook machinery of real stacks (innermost first,
// as this host's kernel gave them) and of a stats clock read inside it.
func TestHookOf(t *testing.T) {
	for want, stack := range map[string]string{
		"syscall_enter":           "__pi_memcpy;perf_syscall_enter;syscall_trace_enter;do_syscall_64",
		"syscall_exit":            "perf_trace_buf_alloc;perf_syscall_exit;syscall_exit_work;do_syscall_64",
		"syscall_slow_path":       "syscall_trace_enter;do_syscall_64",
		"stats_clock":             "native_sched_clock;sched_clock;trace_call_bpf;perf_call_bpf_enter;perf_syscall_enter;syscall_trace_enter",
		"raw_tp:sys_enter":        "__rcu_read_lock;__bpf_trace_run;__bpf_trace_sys_enter;syscall_trace_enter;do_syscall_64",
		"kprobe":                  "trace_call_bpf;kprobe_perf_func;kprobe_ftrace_handler;__x64_sys_getppid",
		"tracepoint:sched_switch": "its_return_thunk;trace_call_bpf;perf_trace_run_bpf_submit;perf_trace_sched_switch;__schedule",
		"":                        "__task_pid_nr_ns;__x64_sys_getppid;do_syscall_64",
	} {
		if got := hookOf(strings.Split(stack, ";")); got != want {
			t.Errorf("hookOf(%s) = %q, want %q", stack, got, want)
		}
	}
	// The probes, on 6.1 and 6.12 (TestProbeHooks' stacks).
	for _, c := range []struct{ want, stack string }{
		{"kprobe", "kprobe_perf_func;kprobe_dispatcher;kprobe_ftrace_handler;__x64_sys_getppid"},
		{"kretprobe", "trace_call_bpf;kretprobe_perf_func;kretprobe_dispatcher;kretprobe_rethook_handler;rethook_trampoline_handler;arch_rethook_trampoline_callback;arch_rethook_trampoline;do_syscall_64"},
		{"kretprobe", "rethook_try_get;pre_handler_kretprobe;kprobe_ftrace_handler;__x64_sys_getppid"},
		{"stats_clock", "native_sched_clock;sched_clock;trace_call_bpf;kretprobe_perf_func;kretprobe_dispatcher"},
		{"kprobe_multi", "migrate_disable;kprobe_multi_link_handler;fprobe_handler;__x64_sys_getppid"},
		{"stats_clock", "sched_clock;kprobe_multi_link_handler;fprobe_handler;__x64_sys_getppid"},
		{"uprobe", "__uprobe_perf_func;uprobe_dispatcher;handler_chain;uprobe_notify_resume;irqentry_exit_to_user_mode"},
		{"uprobe", "trace_call_bpf;__uprobe_perf_func;uprobe_dispatcher;handler_chain"},
		{"uprobe", "find_active_uprobe;handle_swbp;uprobe_notify_resume"},
		{"uretprobe", "trace_call_bpf;__uprobe_perf_func;uretprobe_dispatcher;handle_uretprobe_chain;uprobe_handle_trampoline;__x64_sys_uretprobe"},
		{"uretprobe", "prepare_uretprobe;handler_chain;handle_swbp;uprobe_notify_resume"},
		{"uretprobe", "handle_trampoline;handle_swbp;uprobe_notify_resume"},
		// The trap of a uprobe's breakpoint and single step, where the
		// timer's interrupt, held off through it, lands (this host, 6.18).
		{"uprobe", "pvm_irq_enable;__raw_callee_save_pvm_irq_enable;irqentry_exit_to_user_mode;asm_exc_int3"},
		{"uprobe", "pvm_irq_enable;__raw_callee_save_pvm_irq_enable;irqentry_exit_to_user_mode;exc_debug_user;asm_exc_debug"},
		{"uprobe", "xol_free_insn_slot;uprobe_notify_resume;irqentry_exit_to_user_mode;exc_debug_user;asm_exc_debug"},
		{"uretprobe", "_copy_from_user;__x64_sys_uretprobe;do_syscall_64;entry_SYSCALL_64_after_hwframe"},
		{"uprobe", "exit_to_user_mode_prepare;irqentry_exit_to_user_mode;noist_exc_debug;asm_exc_debug"}, // 6.1
		// A kprobe's entry, a kprobe's or a kretprobe's.
		{"kprobe", "get_kprobe;kprobe_ftrace_handler;ftrace_trampoline;__x64_sys_getppid;do_syscall_64"},
		{"kprobe", "kprobe_int3_handler;exc_int3;asm_exc_int3;__x64_sys_getppid;do_syscall_64"},
		// The rethook alone: a kretprobe's or a kprobe_multi's return.
		{"rethook", "objpool_push.isra.0;rethook_trampoline_handler;arch_rethook_trampoline_callback;arch_rethook_trampoline;do_syscall_64"},
		// ftrace's trampoline, every ftrace user's.
		{"", "ftrace_trampoline;__x64_sys_getppid;do_syscall_64;entry_SYSCALL_64_after_hwframe"},
	} {
		want, stack := c.want, c.stack
		if got := hookOf(strings.Split(stack, ";")); got != want {
			t.Errorf("hookOf(%s) = %q, want %q", stack, got, want)
		}
	}
	// The slow path is the entry work's own time, not the system call's.
	if got := hookOf(strings.Split("__task_pid_nr_ns;syscall_trace_enter", ";")); got != "" {
		t.Errorf("a sample under syscall_trace_enter but not in it: %q", got)
	}
}

// TestTrampolineHookOf: samples in an fentry/fexit trampoline on a kernel
// function, or in what it calls around each program, are that function's
// trampoline hook, named from the trampoline's key (its stats clock reads
// apart); the traced function's own body, which an fexit trampoline
// calls, is not.
func TestTrampolineHookOf(t *testing.T) {
	// The kernel's BTF object 1, __do_sys_getppid its type 81357 (as in
	// Debian's 6.1): key 1<<32 | 1<<31 | 81357.
	const getppid = "bpf_trampoline_6442532301"
	name := func(obj, typ uint32) (string, bool) {
		if obj == 1 && typ == 81357 {
			return "__do_sys_getppid", true
		}
		return "", obj == 1
	}
	for _, c := range []struct{ stack, want string }{
		{getppid + ";__x64_sys_getppid;do_syscall_64", "trampoline:__do_sys_getppid"},
		// A sample in the trampoline's prologue: the caller's caller outside.
		{getppid + ";entry_SYSCALL_64_after_hwframe", "trampoline:__do_sys_getppid"},
		{"__bpf_prog_enter_recur;" + getppid + ";__x64_sys_getppid", "trampoline:__do_sys_getppid"},
		{"migrate_disable;__bpf_prog_enter;" + getppid + ";__x64_sys_getppid", "trampoline:__do_sys_getppid"},
		// Tail calls of the exit: the trampoline is their caller.
		{"__rcu_read_unlock;" + getppid + ";__x64_sys_getppid", "trampoline:__do_sys_getppid"},
		{"native_sched_clock;sched_clock;__bpf_prog_enter_recur;" + getppid + ";__x64_sys_getppid", "stats_clock"},
		// A type the namer does not know: the frame outside names it,
		// past ftrace's caller (a function traced by ftrace and BPF).
		{"bpf_trampoline_6442450945;ftrace_regs_caller;tcp_sendmsg;inet_sendmsg", "trampoline:tcp_sendmsg"},
		// On a program (no BTF-object bit): not named from BTF.
		{"bpf_trampoline_17179869185;bpf_prog_1234_xdp", "trampoline:bpf_prog_1234_xdp"},
		// fexit calls the function's body: its work, not the hook's.
		{"__task_pid_nr_ns;" + getppid + ";__x64_sys_getppid;do_syscall_64", ""},
		// Not a trampoline: a dispatcher.
		{"bpf_dispatcher_xdp;__netif_receive_skb", ""},
		{"bpf_trampoline_6442450945", "trampoline"},
	} {
		funcs := strings.Split(c.stack, ";")
		at := slices.IndexFunc(funcs, func(f string) bool { return strings.HasPrefix(f, "bpf_") && !strings.HasPrefix(f, "bpf_prog_") })
		if got := trampolineHookOf(funcs, at, name); got != c.want {
			t.Errorf("trampolineHookOf(%s, %d) = %q, want %q", c.stack, at, got, c.want)
		}
	}
}

// TestDecodeRootCgroupFromProc: a sample naming the root cgroup (as some
// kernels put in every sample) takes its task's cgroup from /proc, read
// once per task; a task /proc no longer has, or one in the root, stays
// the root's, and samples naming another cgroup are left alone.
func TestDecodeRootCgroupFromProc(t *testing.T) {
	proc, cgroups := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "42/task/43"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "42/task/43/cgroup"), []byte("0::/system.slice/app.service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cgroups, "system.slice/app.service")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	d := newDecoder(proc)
	d.cgroups, d.cgroupRoot = true, cgroups
	rec := func(pid, tid uint32, cgroup uint64) []byte {
		b := make([]byte, offIPs+8)
		binary.NativeEndian.PutUint32(b[offPID:], pid)
		binary.NativeEndian.PutUint32(b[offTID:], tid)
		binary.NativeEndian.PutUint64(b[offIPs:], cgroup)
		return b
	}
	for _, tc := range []struct {
		pid, tid uint32
		in, want uint64
	}{
		{42, 43, 1, st.Ino}, // root in the sample, the service in /proc
		{42, 43, 1, st.Ino}, // again, from the cache
		{42, 44, 1, 1},      // gone from /proc
		{0, 0, 1, 1},        // the idle task
		{42, 43, 77, 77},    // the kernel named a cgroup: kept
	} {
		s, ok := d.sample(rec(tc.pid, tc.tid, tc.in))
		if !ok || s.Cgroup != tc.want {
			t.Errorf("pid %d tid %d cgroup %d: got %d, want %d", tc.pid, tc.tid, tc.in, s.Cgroup, tc.want)
		}
	}
}
