package daemon_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// pinnedProg is a program a test loads with `bpftool prog load` at a pin,
// as users and loaders that exit do.
type pinnedProg struct {
	pin       string
	id        uint32
	loaderPID int // the bpftool process that loaded it, exited since
}

// loadPinned loads the first program of obj at pin with bpftool, which
// exits at once: the program lives on at its pin.
func loadPinned(t *testing.T, obj, pin string) pinnedProg {
	t.Helper()
	cmd := exec.Command("bpftool", "prog", "load", obj, pin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bpftool prog load %s %s: %v: %s", obj, pin, err, out)
	}
	t.Cleanup(func() { os.Remove(pin) })
	out, errOut, code := run("bpftool", "prog", "show", "pinned", pin, "-j")
	var info struct {
		ID uint32 `json:"id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.ID == 0 {
		t.Fatalf("bpftool prog show pinned %s: %s %s", pin, out, errOut)
	}
	return pinnedProg{pin: pin, id: info.ID, loaderPID: cmd.Process.Pid}
}

// drivePinned test-runs the program at pin in batches of 2,000 with
// `bpftool prog run`, one process after another, until stopped: each
// holds the program while it runs, as a passer-by would.
func drivePinned(t *testing.T, pin string) (stop func()) {
	t.Helper()
	pkt := filepath.Join(t.TempDir(), "pkt")
	if err := os.WriteFile(pkt, make([]byte, 64), 0o644); err != nil {
		t.Fatal(err)
	}
	return paceWith(t, time.Millisecond, func() error {
		if out, err := exec.Command("bpftool", "prog", "run", "pinned", pin, "data_in", pkt, "repeat", "2000").CombinedOutput(); err != nil {
			return fmt.Errorf("bpftool prog run: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	})
}

// replacePinned removes the pin and waits until the kernel freed the
// program (its drivers stopped first), then loads obj there.
func replacePinned(t *testing.T, old pinnedProg, obj string) pinnedProg {
	t.Helper()
	if err := os.Remove(old.pin); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old program freed", func() bool {
		_, _, code := run("bpftool", "prog", "show", "id", strconv.FormatUint(uint64(old.id), 10))
		return code != 0
	})
	return loadPinned(t, obj, old.pin)
}

// TestPinnedReloadRegression (issue 41): a program pinned by `bpftool prog
// load`, which exits at once, driven by `bpftool prog run` processes while
// a passer-by in a .service cgroup runs `bpftool prog show` on it in a
// loop, then replaced at its pin by a version with 1.5x the work. Both
// versions are one identity, runner the pin (the loader's command is no
// .service and it exited; the passers-by never decide), with exactly one
// new_version and a regression of about 1.5x that check fails on; show
// names the loader, bpftool, with the pid it had. A third load of the same
// code raises nothing. The daemon runs at its defaults (a stats budget,
// under which this load runs at a share). As TestRegressionEndToEnd does,
// a ratio outside 1.35-1.65, or no finding, is tried again at another pin,
// up to three times (ratios of 1.36 to 1.92 were read here, 2 in 13
// outside): the machine is shared; a daemon whose ratio is wrong fails
// all three.
func TestPinnedReloadRegression(t *testing.T) {
	privtest.Root(t)
	needBpftool(t)
	privtest.Tracefs(t) // the loaders' sys_enter_bpf tracepoint
	const window = 5 * time.Second
	d := startDaemon(t, t.TempDir(), "--regressions.window", window.String(), "--profile.every", "0")
	stopControl := pace(t, loop(t, uniqueName("pin_ctl"), 10000), 50)
	defer stopControl()
	passerBy := privtest.MakeCgroup(t, "system.slice/bpfperf-passerby.service")

	var pin, want string
	var v2 pinnedProg
	var r api.Regression
	for attempt := 1; ; attempt++ {
		pin = filepath.Join("/sys/fs/bpf", uniqueName("pinrel"))
		want = "socket_filter/reg_prog by pin " + pin
		passer := passerBy.Start(t, exec.Command("sh", "-c", "while :; do bpftool prog show pinned "+pin+" >/dev/null 2>&1; sleep 0.02; done"))
		r, v2 = pinnedReload(t, d, pin, want, window)
		passer.Process.Kill()
		var st api.Status
		d.json(t, &st, "status")
		t.Logf("attempt %d: ratio %.3f [%.3f, %.3f], p=%.2g, %d+%d intervals, %d controls; stats duty %d%%; loaders: %s",
			attempt, r.Ratio, r.RatioLo, r.RatioHi, r.P, r.NBefore, r.NAfter, r.Controls, st.StatsCost.DutyPercent, st.Loaders)
		if r.Ratio >= 1.35 && r.Ratio <= 1.65 {
			break
		}
		if attempt == 3 {
			t.Fatalf("ratio %.3f (0: nothing found) in the last of 3 attempts, want a regression of 1.35-1.65 (600 loop turns against 400)", r.Ratio)
		}
	}
	var show api.ProgDetail
	d.json(t, &show, "show", strconv.FormatUint(uint64(v2.id), 10))
	out, errOut, code := run(bin.cli, "--socket", d.socket, "check", show.IdentityID, "--max-regression", "10%")
	if code != 1 || !strings.Contains(out+errOut, "slower") {
		t.Errorf("check %s --max-regression 10%%: exit %d %q %q, want 1, slower", show.IdentityID, code, out, errOut)
	}

	// The same code again: no new version, nothing found.
	v3 := replacePinned(t, v2, "pinned_v2_bpfel_test.o")
	stop := drivePinned(t, pin)
	time.Sleep(window + 3*time.Second)
	stop()
	var show3 api.ProgDetail
	d.json(t, &show3, "show", strconv.FormatUint(uint64(v3.id), 10))
	versions, found := versionsAndFindings(t, d, want)
	if show3.Identity != want || versions != 1 || len(found) != 1 {
		t.Errorf("identical reload: identity %q, %d new_version events, %d findings; want %q, 1 and 1", show3.Identity, versions, len(found), want)
	}
}

// pinnedReload is one run of TestPinnedReloadRegression's scenario at pin:
// v1 loaded and driven for two windows, replaced by v2, driven until the
// regression is found. It checks the identities, the loader and that the
// one finding is the identity's, and returns it and v2.
func pinnedReload(t *testing.T, d *daemonProc, pin, want string, window time.Duration) (api.Regression, pinnedProg) {
	t.Helper()
	v1 := loadPinned(t, "pinned_v1_bpfel_test.o", pin)
	stop := drivePinned(t, pin)
	time.Sleep(2*window + time.Second)
	stop()
	v2 := replacePinned(t, v1, "pinned_v2_bpfel_test.o")
	stop = drivePinned(t, pin)
	var found []api.Regression
	for deadline := time.Now().Add(2*window + 15*time.Second); len(found) == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, found = versionsAndFindings(t, d, want)
	}
	stop()

	var show1, show2 api.ProgDetail
	d.json(t, &show1, "show", strconv.FormatUint(uint64(v1.id), 10))
	d.json(t, &show2, "show", strconv.FormatUint(uint64(v2.id), 10))
	t.Logf("v1 %d: %s; v2 %d: %s; loader %+v", v1.id, show1.Identity, v2.id, show2.Identity, show2.Meta.Loader)
	if show1.Identity != want || show2.Identity != want {
		t.Errorf("identities %q and %q, want both %q", show1.Identity, show2.Identity, want)
	}
	if lo := show2.Meta.Loader; lo == nil || lo.PID != v2.loaderPID || lo.Comm != "bpftool" {
		t.Errorf("v2's loader %+v, want bpftool with pid %d (exited)", lo, v2.loaderPID)
	}
	if out := d.cli(t, "show", strconv.FormatUint(uint64(v2.id), 10)); !strings.Contains(out, "bpftool("+strconv.Itoa(v2.loaderPID)+")") {
		t.Errorf("show does not name the loader bpftool(%d):\n%s", v2.loaderPID, out)
	}
	versions, found := versionsAndFindings(t, d, want)
	if versions != 1 || len(found) > 1 || (len(found) == 1 && found[0].Kind != "regression") {
		t.Fatalf("%d new_version events and findings %+v, want one new_version and at most one finding, a regression of %s\n%s", versions, found, want, d.stderr)
	}
	if len(found) == 0 {
		var evs []api.Event
		d.json(t, &evs, "events", "--since", "1h", "--prog", "reg_prog")
		var why []string // the detector's reason, where it compared and could not decide
		for _, l := range strings.Split(d.stderr.String(), "\n") {
			if strings.Contains(l, "not compared") && strings.Contains(l, "reg_prog") {
				why = append(why, l)
			}
		}
		t.Logf("no regression of %s after %v; events of reg_prog: %+v; the detector: %q", want, 2*window+15*time.Second, evs, why)
		return api.Regression{}, v2
	}
	return found[0], v2
}

// versionsAndFindings counts the new_version events of identity key and
// lists its findings.
func versionsAndFindings(t *testing.T, d *daemonProc, key string) (versions int, found []api.Regression) {
	t.Helper()
	var evs []api.Event
	d.json(t, &evs, "events", "--since", "1h", "--prog", "reg_prog")
	for _, e := range evs {
		if e.Kind == "new_version" && e.Identity == key {
			versions++
		}
	}
	var all []api.Regression
	d.json(t, &all, "regressions", "--since", "1h", "--prog", "reg_prog")
	for _, r := range all {
		if r.Identity == key {
			found = append(found, r)
		}
	}
	return versions, found
}
