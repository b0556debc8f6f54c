package main

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func showCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show everything known about one program",
		ArgsUsage: "PROG (an id, a name when unique, name@tag, or an identity)",
		Flags:     []cli.Flag{outputFlag},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			prog, err := oneArg(c, "PROG")
			if err != nil {
				return err
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			d, err := client.Show(prog)
			if err != nil {
				return err
			}
			kv := showFields(d)
			doc := showDoc{ProgDetail: d}
			if d.Loaded {
				// Profiles name programs by this boot's ids.
				t, err := client.Triggers(strconv.FormatUint(uint64(d.ID), 10), "", time.Time{}, time.Time{})
				kv = append(kv, [2]string{"triggered by", triggeredLine(t, err)})
				doc.TriggeredBy, doc.TriggeredByUnavailable = orWhy(t, err)
				h, err := client.Hooks(strconv.FormatUint(uint64(d.ID), 10), time.Time{}, time.Time{})
				kv = append(kv, [2]string{"hook overhead", hookLine(h, err)})
				doc.HookOverhead, doc.HookOverheadUnavailable = orWhy(h, err)
			}
			kv = append(kv, [2]string{"latency", latencyLine(d.Latency)})
			return renderShow(c, doc, kv)
		},
	}
}

// showFields is what show says about a program, in order, as field and
// value.
func showFields(d api.ProgDetail) [][2]string {
	m := d.Meta
	var owners []string
	for _, o := range m.Owners {
		if pin := o.PinOnly(); pin != "" {
			owners = append(owners, "pin:"+pin)
			continue
		}
		owners = append(owners, fmt.Sprintf("%s(%d)", o.Comm, o.PID))
	}
	maps := make([]string, len(m.MapIDs))
	for i, id := range m.MapIDs {
		maps[i] = strconv.FormatUint(uint64(id), 10)
	}
	state := "loaded"
	if !d.Loaded {
		state = "unloaded at " + fmtTime(d.UnloadedAt)
	}
	kv := [][2]string{
		{"id", strconv.FormatUint(uint64(d.ID), 10)},
		{"name", d.Name},
		{"kernel_name", d.KernelName},
		{"type", d.Type},
		{"tag", d.Tag},
		{"identity", identityLine(d.ProgRow)},
		{"state", state},
		{"loaded_at", fmtTime(m.LoadedAt)},
		{"uid", strconv.FormatUint(uint64(m.UID), 10)},
		{"gpl_compatible", strconv.FormatBool(m.GPLCompatible)},
		{"bytes_xlated", strconv.FormatUint(uint64(m.BytesXlated), 10)},
		{"bytes_jited", strconv.FormatUint(uint64(m.BytesJited), 10)},
		{"bytes_memlock", strconv.FormatUint(m.BytesMemlock, 10)},
		{"verified_insns", strconv.FormatUint(uint64(m.VerifiedInsns), 10)},
		{"btf_id", strconv.FormatUint(uint64(m.BTFID), 10)},
		{"map_ids", strings.Join(maps, ",")},
		{"attach", attachLine(m.Attach)},
		{"loader", loaderLine(m.Loader)},
		{"pin", cmp.Or(m.Pin, "-")},
		{"pids", strings.Join(owners, ", ")},
		{"run_cnt", fmtCount(d.RunCnt)},
		{"run_time_ns", fmtCount(d.RunTimeNs)},
		{"recursion_misses", fmtCount(d.RecursionMisses)},
		{"runs/s", fmtRate(d.RunsPerSec)},
		{"avg/run", fmtNs(d.AvgNsPerRun)},
		{"avg/run since load", fmtNs(d.AvgNsSinceLoad)},
		{"cpu", fmtPercent(d.CPUPercent)},
	}
	if d.Pod != nil {
		at := slices.IndexFunc(kv, func(p [2]string) bool { return p[0] == "loader" })
		kv = slices.Insert(kv, at+1, [2]string{"pod", podLine(d.Pod)})
	}
	if missed, ok := linksMissed(m.Attach); ok {
		// Beside recursion_misses: the other way a program's events go
		// unseen, counted by the kprobe links.
		at := slices.IndexFunc(kv, func(p [2]string) bool { return p[0] == "recursion_misses" })
		kv = slices.Insert(kv, at+1, [2]string{"links_missed", fmtCount(missed) + " (kprobe links' missed count)"})
	}
	kv = append(kv, showCountersKV(d.PerfCounters)...)
	if d.SampledCPUPercent != nil {
		kv = append(kv, [2]string{"sampled cpu", fmtPercent(d.SampledCPUPercent) + " (CPU profile, covers tail calls)"})
	}
	return kv
}

// attachLine lists a program's attach points: "TYPE TARGET (link N)", ...
func attachLine(points []api.AttachPoint) string {
	var attach []string
	for _, a := range points {
		// No link: attached through netlink (tc, XDP) or a perf event's
		// ioctl (bpftrace), as bpftool net and perf list.
		link := "no link"
		if a.LinkID != 0 {
			link = fmt.Sprintf("link %d", a.LinkID)
		}
		if a.Missed != nil {
			link += ", missed " + fmtCount(*a.Missed) // kprobe links, Linux 6.7+
		}
		target := a.Target
		if a.Netns != "" {
			target += " in " + a.Netns // the ifindex and name are the device's there
		}
		attach = append(attach, strings.TrimSpace(fmt.Sprintf("%s %s (%s)", a.Type, target, link)))
	}
	return strings.Join(attach, "; ")
}

// showDoc is show's JSON: the program as the API gives it, and what the
// table adds from other endpoints, so that a script reads what a person
// does. The added parts are absent for an unloaded program (profiles name
// programs by this boot's ids); where a part could not be read, its
// *_unavailable says why, as the table's line does.
type showDoc struct {
	api.ProgDetail
	// TriggeredBy is `bpfperf triggers PROG` over the last hour: the
	// table's "triggered by" line is its costliest rows.
	TriggeredBy            *api.Triggers `json:"triggered_by,omitempty"`
	TriggeredByUnavailable string        `json:"triggered_by_unavailable,omitempty"`
	// HookOverhead is `bpfperf hooks PROG` over the last hour: the
	// table's "hook overhead" line.
	HookOverhead            *api.Hooks `json:"hook_overhead,omitempty"`
	HookOverheadUnavailable string     `json:"hook_overhead_unavailable,omitempty"`
}

// orWhy is v for the JSON, or the reason it is missing.
func orWhy[T any](v T, err error) (*T, string) {
	if err != nil {
		return nil, err.Error()
	}
	return &v, ""
}

// renderShow prints kv one field a line for people; JSON is d, CSV the
// fields.
func renderShow(c *cli.Context, d showDoc, kv [][2]string) error {
	if c.String("output") == "table" {
		for _, p := range kv {
			fmt.Printf("%-19s %s\n", p[0]+":", p[1])
		}
		return nil
	}
	t := table{fields: []string{"field", "value"}}
	for _, p := range kv {
		t.rows = append(t.rows, []string{p[0], p[1]})
	}
	return render(c, os.Stdout, d, t)
}

// linksMissed sums the missed counts of a program's kprobe links; ok is
// false when none of its links has one (not a kprobe link, or before Linux
// 6.7).
func linksMissed(points []api.AttachPoint) (sum uint64, ok bool) {
	for _, a := range points {
		if a.Missed != nil {
			sum, ok = sum+*a.Missed, true
		}
	}
	return sum, ok
}

// podLine names the pod that runs a program: "NAMESPACE/POD (container
// NAME), workload KIND/NAME, pod uid UID".
func podLine(p *api.Pod) string {
	return p.String() + ", workload " + p.Workload + ", pod uid " + p.UID
}

// identityLine is "ID (KEY)", or why there is none yet.
func identityLine(r api.ProgRow) string {
	if r.Identity == "" {
		return "- (settles once its attach points and owners are read)"
	}
	return r.IdentityID + " (" + r.Identity + ")"
}

// loaderLine says who loaded a program, as the kernel's load record and
// the loader's cgroup at that moment said: it may have exited since.
func loaderLine(lo *api.Loader) string {
	if lo == nil {
		return "unknown (loaded before bpfperfd started, or its load record was lost)"
	}
	s := fmt.Sprintf("%s(%d) at %s", cmp.Or(lo.Comm, "?"), lo.PID, fmtTime(lo.At))
	switch {
	case lo.Pod != nil:
		s += ", pod " + lo.Pod.String()
	case lo.Unit != "" && lo.Container != "":
		s += ", unit " + lo.Unit + ", container " + lo.Container
	case lo.Unit != "":
		s += ", unit " + lo.Unit
	case lo.Container != "":
		s += ", container " + lo.Container
	case lo.Cgroup != "":
		s += ", cgroup " + lo.Cgroup
	}
	return s
}
