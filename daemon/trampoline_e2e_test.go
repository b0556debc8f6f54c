package daemon_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// TestRealToolsTrampolineVfsstat: libbpf-tools' vfsstat counts VFS calls
// with fentry programs where the kernel allows them. Under a read and
// write loop, bpfperf names each program's attach point as the function
// it traces (bpftool gives only BTF ids: the same ids), and charges the
// samples in vfs_read's trampoline to vfsstat's vfs_read program as its
// hook cost, beside its run time, never negative.
func TestRealToolsTrampolineVfsstat(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs fentry: runs in the VM (TestDaemonInVM)")
	}
	privtest.Root(t)
	// Stats on all the time (no budget): under the emulated CPU, flipping
	// bpf_stats' static key while another CPU runs the trampoline's
	// update_prog_stats once hung the guest (a soft lockup, the kernel's
	// text patching under TCG; TestHooksInVM saw the same with
	// tracepoints).
	d, _ := startProfilingDaemon(t, "--stats.budget", "0")
	vs := startTool(t, "vfsstat")
	var prog api.ProgRow
	// Owners and attach points are read every 5 s, and vfsstat loads
	// slowly under emulation.
	var rows []api.ProgRow
	for deadline := time.Now().Add(time.Minute); prog.ID == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			bt, _, _ := run("bpftool", "link", "show")
			t.Fatalf("after a minute, no program of vfsstat (pid %d, exited: %v) attached with fentry to vfs_read; the daemon lists %+v\n$ bpftool link show\n%s\n%s", vs.pid, vs.cmd.ProcessState, rows, bt, d.stderr)
		}
		d.json(t, &rows, "progs")
		for _, r := range rows {
			owned := slices.ContainsFunc(r.Owners, func(o api.Owner) bool { return o.PID == vs.pid })
			if owned && slices.ContainsFunc(r.Attach, func(a api.AttachPoint) bool { return a.Type == "tracing" && a.Target == "fentry vfs_read" }) {
				prog = r
			}
		}
	}
	ref := strconv.Itoa(int(prog.ID))

	// The kernel's ids for the same link (as cilium/ebpf decodes them;
	// bpftool 7.1 prints the attach type only) are vfs_read's in the
	// kernel's BTF.
	wantBTF := privtest.KernelFuncID(t, "vfs_read")
	at := prog.Attach[slices.IndexFunc(prog.Attach, func(a api.AttachPoint) bool { return a.Target == "fentry vfs_read" })]
	if _, typ := privtest.TracingLinkTarget(t, at.LinkID); typ != wantBTF {
		t.Errorf("link %d: the kernel says BTF type %d, want %d (vfs_read)", at.LinkID, typ, wantBTF)
	}
	var bt struct {
		ProgID     uint32 `json:"prog_id"`
		AttachType string `json:"attach_type"`
	}
	out, errOut, code := run("bpftool", "link", "show", "id", strconv.Itoa(int(at.LinkID)), "-j")
	if code != 0 || json.Unmarshal([]byte(out), &bt) != nil || bt.ProgID != prog.ID || bt.AttachType != "trace_fentry" {
		t.Errorf("bpftool link show id %d: %s%s; want program %d, trace_fentry", at.LinkID, out, errOut, prog.ID)
	}

	since := time.Now()
	if out, err := exec.Command("dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=300000").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v %s", err, out)
	}
	var row *api.HookRow
	// Under emulation a slow CI host took 7 s longer over the steps above
	// than this one, and no window had come 10 s after dd (2026-11-27);
	// the last answer tells a late window from a wrong one.
	var h api.Hooks
	var lastErr error
	defer func() {
		if row == nil || row.NsPerRun == nil {
			t.Logf("the last hooks answer: %+v, error %v\n%s", h, lastErr, d.stderr)
		}
	}()
	eventuallyFor(t, 40*time.Second, "a profile window with vfs_read's trampoline", func() bool {
		h = api.Hooks{}
		if lastErr = d.query(&h, "hooks", ref, "--since", since.Add(-2*time.Second).Format(time.RFC3339Nano)); lastErr != nil {
			return false
		}
		for i, r := range h.Rows {
			if r.Hook == "trampoline:vfs_read" {
				row = &h.Rows[i]
			}
		}
		return row != nil && row.NsPerRun != nil
	})
	t.Logf("%s: %d samples, %.0f ns a run, %.2fx run time, programs %+v", row.Hook, row.Samples, deref(row.NsPerRun), deref(row.RunTimeRatio), row.Programs)
	// Runs over the windows' span: the windows wholly in the range hold
	// part of the loop, and the stats budget may sample them.
	if len(row.Programs) != 1 || row.Programs[0].ID != prog.ID || row.Programs[0].Runs == 0 {
		t.Errorf("trampoline:vfs_read charges %+v, want vfsstat's program %d alone, with runs", row.Programs, prog.ID)
	}
	if *row.NsPerRun <= 0 || row.RunTimeRatio == nil || *row.RunTimeRatio <= 0 {
		t.Errorf("trampoline:vfs_read: %v ns a run, %v x run time: want both above 0", deref(row.NsPerRun), deref(row.RunTimeRatio))
	}
	show := d.cli(t, "show", ref)
	t.Logf("$ bpfperf show %s\n%s", ref, show)
	if !strings.Contains(show, "trampoline:vfs_read") || !strings.Contains(show, "fentry vfs_read") {
		t.Errorf("show names no trampoline:vfs_read hook overhead or fentry vfs_read attach point")
	}
}
