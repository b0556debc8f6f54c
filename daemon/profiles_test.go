package daemon_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/profile"
)

// hotProgram loads a spinning socket filter and runs it in a loop on a
// locked OS thread until the test ends, so CPU samples land in it.
func hotProgram(t testing.TB, name string) (id uint32, tag string) {
	t.Helper()
	prog, id, tag := loadHot(t, name)
	spin(t, prog)
	return id, tag
}

// loadHot loads the hot program's loop (2,000 turns a run), closed when
// the test ends if not before, and says its id and tag.
func loadHot(t testing.TB, name string) (prog *ebpf.Program, id uint32, tag string) {
	t.Helper()
	prog, err := privtest.LoadLoop(name, 2000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := info.ID()
	return prog, uint32(pid), info.Tag
}

// spin runs prog in a loop (privtest.SpinUntil) until the test ends.
func spin(t testing.TB, prog *ebpf.Program) { t.Cleanup(privtest.SpinUntil(t, prog)) }

// spinUntil spins prog as spin does until the returned stop is called.
func spinUntil(t testing.TB, prog *ebpf.Program) (stop func()) { return privtest.SpinUntil(t, prog) }

// pprofTop runs `go tool pprof -top` on a file and returns its output.
func pprofTop(t *testing.T, path string) string {
	t.Helper()
	out, errOut, code := run("go", "tool", "pprof", "-top", path)
	if code != 0 {
		t.Fatalf("go tool pprof -top %s: exit %d: %s", path, code, errOut)
	}
	return out
}

func readProfile(t *testing.T, path string) *pprof.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// listProfiles returns the daemon's profiles of the last hour.
func listProfiles(t *testing.T, d *daemonProc, args ...string) []api.ProfileInfo {
	t.Helper()
	var list []api.ProfileInfo
	d.json(t, &list, append([]string{"profile", "list", "--since", "1h"}, args...)...)
	return list
}

// waitSampledCPU waits for progs to show program id's sampled CPU % over
// min.
func waitSampledCPU(t *testing.T, d *daemonProc, id uint32, min float64) {
	t.Helper()
	eventually(t, fmt.Sprintf("progs to show a sampled CPU %% over %g for program %d", min, id), func() bool {
		var rows []api.ProgRow
		if d.query(&rows, "progs") != nil {
			return false
		}
		for _, r := range rows {
			if r.ID == id {
				return r.SampledCPUPercent != nil && *r.SampledCPUPercent > min
			}
		}
		return false
	})
}

func TestProfileEndToEnd(t *testing.T) {
	privtest.Root(t)
	dir := t.TempDir()
	d := startDaemon(t, dir, "--profile.every", "1s", "--profile.duration", "1s", "--profile.limit", "3s")
	name := uniqueName("e2e_hot")
	id, tag := hotProgram(t, name)

	// Continuous windows are stored and carry the busy program.
	var busy api.ProfileInfo
	eventually(t, "a stored window with the hot program's samples", func() bool {
		var list []api.ProfileInfo
		if d.query(&list, "profile", "list", "--since", "1h") != nil {
			return false
		}
		for _, p := range list {
			if p.Kind == api.ProfileContinuous && p.Samples > 5 {
				busy = p
				return true
			}
		}
		return false
	})
	if busy.Hz != 99 || busy.Event != "cpu-clock" || busy.Bytes == 0 || busy.Duration < int64(900*time.Millisecond) {
		t.Errorf("window %+v: want 99 Hz cpu-clock, about 1 s, some bytes", busy)
	}
	table := d.cli(t, "profile", "list", "--since", "1h")
	if !strings.HasPrefix(table, "ID ") || !strings.Contains(table, "continuous") {
		t.Errorf("profile list:\n%s", table)
	}

	// get writes a file go tool pprof reads, naming the program, its
	// function by the kallsyms name and its tag.
	got := filepath.Join(dir, "got.pb.gz")
	d.cli(t, "profile", "get", busy.ID, "-o", got)
	if top := pprofTop(t, got); !strings.Contains(top, name) {
		t.Errorf("pprof -top of profile %s does not name %s:\n%s", busy.ID, name, top)
	}
	p := readProfile(t, got)
	system := fmt.Sprintf("bpf_prog_%s_%s", tag, name)
	found := false
	for _, f := range p.Function {
		found = found || f.SystemName == system
	}
	if !found {
		t.Errorf("profile %s has no function with system name %s", busy.ID, system)
	}
	shares, err := profile.ProgramShares(p)
	if err != nil || shares[id] <= 0 {
		t.Errorf("profile %s: shares %v (%v), want some for program %d", busy.ID, shares, err, id)
	}

	// progs shows the busy program's sampled CPU %.
	waitSampledCPU(t, d, id, 1)
	var st api.Status
	d.json(t, &st, "status")
	if st.Profiling == nil || !st.Profiling.Continuous || st.Profiling.Windows == 0 || st.Profiling.StoredProfiles == 0 || st.Profiling.ProgramsKnown == 0 {
		t.Errorf("status profiling = %+v", st.Profiling)
	}

	// An on-demand capture is written, stored and listed as such.
	captured := filepath.Join(dir, "cap.pb.gz")
	out := d.cli(t, "profile", "capture", "--duration", "1s", "-o", captured)
	if !strings.HasPrefix(out, "profile ") || !strings.Contains(out, name) {
		t.Errorf("capture said:\n%s", out)
	}
	if top := pprofTop(t, captured); !strings.Contains(top, name) {
		t.Errorf("pprof -top of the capture does not name %s:\n%s", name, top)
	}
	if list := listProfiles(t, d, "--kind", "on-demand"); len(list) != 1 || list[0].Kind != api.ProfileOnDemand {
		t.Errorf("on-demand profiles: %+v", list)
	}

	// One capture at a time.
	first := exec.Command(bin.cli, "--socket", d.socket, "profile", "capture", "--duration", "3s")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first capture to run", func() bool {
		var st api.Status
		return d.query(&st, "status") == nil && st.Profiling != nil && st.Profiling.CaptureRunning
	})
	stdout, stderr, code := run(bin.cli, "--socket", d.socket, "profile", "capture", "--duration", "1s")
	oneLineError(t, "a second capture", stdout, stderr, code, "already running")
	if err := first.Wait(); err != nil {
		t.Errorf("first capture: %v", err)
	}

	// diff and merge write profiles pprof reads.
	list := listProfiles(t, d, "--kind", "continuous")
	if len(list) < 2 {
		t.Fatalf("only %d continuous profiles", len(list))
	}
	diff := filepath.Join(dir, "diff.pb.gz")
	d.cli(t, "profile", "diff", "--base", list[0].ID, "--new", got, "-o", diff)
	pprofTop(t, diff)
	dp := readProfile(t, diff)
	if len(dp.Sample) == 0 {
		t.Error("diff profile has no samples")
	}
	merged := filepath.Join(dir, "merged.pb.gz")
	out = d.cli(t, "profile", "merge", "--since", "1h", "-o", merged)
	if !strings.HasPrefix(out, "merged ") {
		t.Errorf("merge said:\n%s", out)
	}
	if top := pprofTop(t, merged); !strings.Contains(top, name) {
		t.Errorf("merged profile does not name %s:\n%s", name, top)
	}
	mp := readProfile(t, merged)
	if mp.DurationNanos < 2*int64(time.Second) {
		t.Errorf("merged duration %v, want the windows' sum", time.Duration(mp.DurationNanos))
	}

	// Bad input: one line, non-zero exit.
	notPprof := filepath.Join(dir, "not.pb.gz")
	os.WriteFile(notPprof, []byte("this is not a profile\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"profile", "capture", "--duration", "0"}, "--duration 0s"},
		{[]string{"profile", "capture", "--duration", "4s"}, "--profile.limit"},
		{[]string{"profile", "get", "nosuchid", "-o", filepath.Join(dir, "x")}, `no such profile "nosuchid"`},
		{[]string{"profile", "get", "999999", "-o", filepath.Join(dir, "x")}, `no such profile "999999"`},
		{[]string{"profile", "get", busy.ID}, "-o FILE is required"},
		{[]string{"profile", "merge", "--since", "3h", "--until", "2h", "-o", filepath.Join(dir, "x")}, "no profiles between"},
		{[]string{"profile", "merge", "--since", "1h", "--until", "2h", "-o", filepath.Join(dir, "x")}, "is not after --since"},
		{[]string{"profile", "diff", "--base", notPprof, "--new", got, "-o", filepath.Join(dir, "x")}, "not a pprof profile"},
		{[]string{"profile", "diff", "--base", "no/such/file", "--new", got, "-o", filepath.Join(dir, "x")}, "no such file"},
		{[]string{"profile", "diff", "--new", got, "-o", filepath.Join(dir, "x")}, "--base PROFILE is required"},
		{[]string{"profile", "view", notPprof}, "not a pprof profile"},
		{[]string{"profile", "list", "--kind", "weekly"}, `kind "weekly"`},
	} {
		stdout, stderr, code := run(bin.cli, append([]string{"--socket", d.socket}, c.args...)...)
		oneLineError(t, strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a failed command wrote its -o file")
	}

	// view serves pprof's web UI on loopback until interrupted.
	view := exec.Command(bin.cli, "--socket", d.socket, "profile", "view", busy.ID)
	pipe, _ := view.StdoutPipe()
	if err := view.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(pipe).ReadString('\n')
	if err != nil {
		view.Process.Kill()
		t.Fatalf("profile view printed nothing: %v", err)
	}
	url := strings.Fields(line)[len(strings.Fields(line))-3]
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("view printed %q, want a loopback URL", line)
	}
	resp, err := http.Get(url + "top")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), name) {
		t.Errorf("GET %stop: %s, page does not name %s", url, resp.Status, name)
	}
	view.Process.Signal(syscall.SIGINT)
	if err := view.Wait(); err != nil {
		t.Errorf("profile view after SIGINT: %v", err)
	}

	// Profiling holds no program between ticks: only the test holds it.
	if n := fdsHeldBetweenTicks(t, d.cmd.Process.Pid); n != 0 {
		t.Errorf("bpfperfd holds %d program fds", n)
	}
}

func TestProfilesSurviveRestartAndExpire(t *testing.T) {
	privtest.Root(t)
	dir := t.TempDir()
	d := startDaemon(t, dir, "--profile.every", "500ms")
	eventually(t, "two stored windows", func() bool {
		var list []api.ProfileInfo
		return d.query(&list, "profile", "list", "--since", "1h") == nil && len(list) >= 2
	})
	before := listProfiles(t, d)
	if err := d.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, d.stderr)
	}

	// Restarted without continuous profiling: the old profiles are there.
	d = startDaemon(t, dir, "--profile.every", "0")
	after := listProfiles(t, d)
	if len(after) < len(before) || fmt.Sprint(after[:len(before)]) != fmt.Sprint(before) {
		t.Fatalf("after a restart: %+v, before: %+v", after, before)
	}
	d.cli(t, "profile", "get", before[0].ID, "-o", filepath.Join(dir, "old.pb.gz"))
	readProfile(t, filepath.Join(dir, "old.pb.gz"))
	var st api.Status
	d.json(t, &st, "status")
	if st.Profiling == nil || st.Profiling.Continuous || st.Profiling.Windows != 0 {
		t.Errorf("with --profile.every 0, status profiling = %+v", st.Profiling)
	}
	d.stop(t, syscall.SIGTERM)

	// With a retention shorter than their age, they go.
	time.Sleep(time.Second)
	d = startDaemon(t, dir, "--profile.every", "0", "--retention.profiles", "1s")
	eventually(t, "old profiles to expire", func() bool {
		var list []api.ProfileInfo
		return d.query(&list, "profile", "list", "--since", "1h") == nil && len(list) == 0
	})
	stdout, stderr, code := run(bin.cli, "--socket", d.socket, "profile", "get", before[0].ID, "-o", filepath.Join(dir, "x"))
	oneLineError(t, "get an expired profile", stdout, stderr, code, "no such profile")
}

func TestProfileFlagsBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile.hz", "5000"}, "--profile.hz 5000"},
		{[]string{"--profile.every", "1m", "--profile.duration", "2m"}, "longer than --profile.every"},
		{[]string{"--profile.every", "10ms"}, "--profile.every 10ms"},
		{[]string{"--profile.every", "-1s"}, "negative"},
		{[]string{"--profile.limit", "2h"}, "--profile.limit 2h"},
		{[]string{"--retention.profiles", "soon"}, "--retention.profiles"},
	} {
		dir := t.TempDir()
		stdout, stderr, code := run(bin.daemon, append([]string{"--state-dir", dir, "--socket", filepath.Join(dir, "s")}, c.args...)...)
		oneLineError(t, "bpfperfd "+strings.Join(c.args, " "), stdout, stderr, code, c.want)
	}
}

// A tail-called program gets no bpf_stats of its own (the kernel charges the
// entry program), but its samples are its own: progs shows its sampled CPU.
func TestProfileTailCallTarget(t *testing.T) {
	privtest.Root(t)
	d := startDaemon(t, t.TempDir(), "--profile.every", "1s")
	target, err := privtest.LoadLoop(uniqueName("e2e_tgt"), 3000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	entry, jump, err := privtest.LoadTailCallEntry(uniqueName("e2e_ent"), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { entry.Close(); jump.Close() })
	idOf := func(p *ebpf.Program) uint32 {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		return uint32(id)
	}
	entryID, targetID := idOf(entry), idOf(target)
	spin(t, entry)

	var tgt, ent api.ProgRow
	eventually(t, "the tail-call target to get a sampled CPU %", func() bool {
		var rows []api.ProgRow
		if d.query(&rows, "progs") != nil {
			return false
		}
		for _, r := range rows {
			switch r.ID {
			case targetID:
				tgt = r
			case entryID:
				ent = r
			}
		}
		return tgt.SampledCPUPercent != nil && *tgt.SampledCPUPercent > 1 && ent.RunCnt > 0
	})
	t.Logf("entry: run_cnt %d, sampled %s; target: run_cnt %d, sampled %.2f%%", ent.RunCnt, fmtPct(ent.SampledCPUPercent), tgt.RunCnt, *tgt.SampledCPUPercent)
	if tgt.RunCnt != 0 {
		t.Errorf("target run_cnt = %d; the kernel should charge the entry program", tgt.RunCnt)
	}
	if ent.SampledCPUPercent != nil && *ent.SampledCPUPercent >= *tgt.SampledCPUPercent {
		t.Errorf("entry sampled %.2f%% >= target %.2f%%: the target's time went to the entry", *ent.SampledCPUPercent, *tgt.SampledCPUPercent)
	}
}

func fmtPct(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", *f)
}
