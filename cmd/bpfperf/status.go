package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
)

func statusCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the daemon's state: stats mode, programs, store, its own cost",
		Flags: []cli.Flag{outputFlag,
			&cli.BoolFlag{Name: "measure-stats-cost", Usage: "have the daemon measure bpf_stats' cost per run again first (stats go off for a moment after its next tick; needs the stats budget or a duty cycle)"},
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			client, s, err := daemonStatus(c, dial)
			if err != nil {
				return err
			}
			if c.Bool("measure-stats-cost") {
				if _, err := client.MeasureStatsCost(time.Duration(s.IntervalMs) * time.Millisecond); err != nil {
					return fmt.Errorf("measure stats cost: %w", err)
				}
				if s, err = client.Status(); err != nil {
					return err
				}
			}
			return renderStatus(c, s, statusFields(s))
		},
	}
}

// daemonStatus dials the daemon and reads its status.
func daemonStatus(c *cli.Context, dial clientFactory) (*api.Client, api.Status, error) {
	client, err := dial(c)
	if err != nil {
		return nil, api.Status{}, err
	}
	s, err := client.Status()
	return client, s, err
}

// statusFields is what status says, in order, as field and value: what
// every daemon has, then what only some do (a sweep iterator, profiling,
// a damaged store, ...).
func statusFields(s api.Status) [][2]string {
	kv := [][2]string{
		{"version", s.Version},
		{"pid", strconv.Itoa(s.PID)},
		{"uptime", (time.Duration(s.UptimeSeconds) * time.Second).String()},
		{"stats mode", s.StatsMode},
		{"stats detail", s.StatsDetail},
		{"interval", (time.Duration(s.IntervalMs) * time.Millisecond).String()},
		{"programs loaded", strconv.Itoa(s.ProgramsLoaded)},
		{"programs seen", strconv.Itoa(s.ProgramsSeen)},
		{"store", s.StorePath},
		{"store size", fmtBytes(s.StoreBytes)},
		{"last sample", fmtTime(s.LastSample)},
		{"last sweep", fmt.Sprintf("%.2f ms, read %d of %d programs (the rest unchanged)", s.LastSweepMs, s.LastSweepRead, s.ProgramsLoaded)},
		{"last write", fmt.Sprintf("%.2f ms", s.LastWriteMs)},
		{"daemon cpu", daemonCPU(s)},
		{"daemon rss", fmtBytes(s.RSSBytes)},
		{"daemon heap", fmtBytes(s.HeapLiveBytes) + " live"},
	}
	if s.StatsDuty != "" && (s.StatsCost == nil || s.StatsCost.Budget != s.StatsDuty) {
		kv = append(kv, [2]string{"stats duty", s.StatsDuty})
	}
	if s.Sweep != "" {
		kv = append(kv, [2]string{"sweep", s.Sweep + ": " + s.SweepDetail})
	}
	if s.Loaders != "" {
		kv = append(kv, [2]string{"loaders", s.Loaders})
	}
	if s.Pods != "" {
		kv = append(kv, [2]string{"pods", s.Pods})
	}
	if s.Holders != "" {
		kv = append(kv, [2]string{"holders", s.Holders})
	}
	if s.Sweep == "iter" {
		kv = append(kv, [2]string{"sweep bpf cost", fmt.Sprintf("%.3f ms last sweep, %.4f%% of one CPU since load (the iterator's own bpf_stats)", s.SweepBPFMs, s.SweepBPFCPUPercent)})
	}
	if p := s.Profiling; p != nil {
		kv = append(kv, [2]string{"profiling", profilingText(p)})
		if f := p.Filter; f != nil {
			kv = append(kv, [2]string{"profile filter", profileFilterText(f)})
		}
		if d := p.Drains; d != nil {
			kv = append(kv, [2]string{"profile wake-ups", fmt.Sprintf("%d on the drain timer, %d on a full ring, before windows' ends", d.Timed, d.Full)})
		}
	}
	if sc := s.StatsCost; sc != nil {
		kv = append(kv, [2]string{"stats cost", statsCostText(sc)})
		if sc.Budget != "" {
			kv = append(kv, [2]string{"stats budget", sc.Budget})
		}
	}
	kv = append(kv, countersStatusKV(s.Counters)...)
	if l := s.Latency; l != nil {
		kv = append(kv, [2]string{"latency", latencyStatusText(l)})
	}
	if s.SkippedPrograms > 0 {
		kv = append(kv, [2]string{"skipped programs", fmt.Sprintf("%d (%s)", s.SkippedPrograms, s.SkipReason)})
	}
	if s.StoreDamaged != "" {
		kv = append(kv, [2]string{"store damage", "writes stopped: " + s.StoreDamaged + "; stop bpfperfd, then run bpfperf store salvage --file " + s.StorePath + " --to NEW.db"})
	}
	if s.StoreUnansweredSeconds > 0 {
		kv = append(kv, [2]string{"store stuck", fmt.Sprintf("a read has waited %.1fs: a write is stuck in the kernel (frozen or hung disk?); programs seen and stored profiles are the last counted", s.StoreUnansweredSeconds)})
	}
	if s.StoreGone != "" {
		kv = append(kv, [2]string{"store gone", s.StoreGone + "; what bpfperfd writes now is lost when it stops: restart it"})
	}
	if s.LastError != "" {
		kv = append(kv, [2]string{"last error", s.LastError})
	}
	return kv
}

// renderStatus prints kv one field a line, values lined up, for people;
// JSON is s itself, CSV the fields.
func renderStatus(c *cli.Context, s api.Status, kv [][2]string) error {
	if c.String("output") == "table" {
		width := 0
		for _, p := range kv {
			width = max(width, len(p[0])+1)
		}
		for _, p := range kv {
			fmt.Fprintf(os.Stdout, "%-*s %s\n", width, p[0]+":", p[1])
		}
		return nil
	}
	t := table{header: []string{"FIELD", "VALUE"}, fields: []string{"field", "value"}}
	for _, p := range kv {
		t.rows = append(t.rows, []string{p[0], p[1]})
	}
	return render(c, os.Stdout, s, t)
}

// profilingText says whether the daemon profiles continuously, at what rate
// and on what event, and how many profiles it keeps.
func profilingText(p *api.ProfilingStatus) string {
	line := fmt.Sprintf("on demand only, %d Hz %s", p.Hz, p.Event)
	if p.Continuous {
		line = fmt.Sprintf("continuous, %d Hz %s, %v windows every %v", p.Hz, p.Event,
			time.Duration(p.WindowMs)*time.Millisecond, time.Duration(p.EveryMs)*time.Millisecond)
	}
	return fmt.Sprintf("%s; %d stored", line, p.StoredProfiles)
}

// statsCostText says what bpf_stats costs per run and host-wide, or why it
// was not measured.
func statsCostText(sc *api.StatsCost) string {
	if !sc.Measured {
		return fmt.Sprintf("%s; %s runs/s on the host", sc.Detail, fmtRate(&sc.RunsPerSec))
	}
	line := fmt.Sprintf("%.0f ns per run (%.0f -> %.0f ns for an empty program; wall clock %.0f ns%s), x %s runs/s = %s of one CPU",
		sc.NsPerRun, sc.OffNsPerRun, sc.OnNsPerRun, sc.WallClockNsPerRun, spreadText(sc), fmtRate(&sc.RunsPerSec), fmtPercent(sc.CPUPercent))
	if sc.DutyPercent < 100 && sc.PaidCPUSecondsPerSec != nil {
		paid := *sc.PaidCPUSecondsPerSec * 100
		line += fmt.Sprintf(" at full time; %s paid now, on %d%% of each interval", fmtPercent(&paid), sc.DutyPercent)
	}
	return line
}

// spreadText is how much the pairs of the measurement moved, and a
// warning where the figure did not settle.
func spreadText(sc *api.StatsCost) string {
	var s string
	if len(sc.SpreadNs) == 2 {
		s = fmt.Sprintf("; %d pairs, %.0f-%.0f ns", sc.Pairs, sc.SpreadNs[0], sc.SpreadNs[1])
	}
	if !sc.Settled {
		s += "; unsettled: the host was too noisy"
	}
	return s
}

// daemonCPU is status's "daemon cpu" field. Its window is the last minute;
// in the first minute it is the time since the first tick, which holds
// the start-up's one-off work (the stats cost measured, every program
// read once): 43% of a CPU at 0 s, 11% at 3 s on our 2-vCPU VM, so the
// line says so rather than calling it a minute's.
func daemonCPU(s api.Status) string {
	if s.UptimeSeconds < 60 {
		return fmt.Sprintf("%.2f%% of one CPU (since start, %s: start-up included)", s.CPUPercent, (time.Duration(s.UptimeSeconds) * time.Second).String())
	}
	return fmt.Sprintf("%.2f%% of one CPU (last minute)", s.CPUPercent)
}

// profileFilterText says whether the kernel filter keeps samples outside
// BPF code from the daemon, and how many it kept out.
func profileFilterText(f *api.ProfilingFilter) string {
	state := "on"
	switch {
	case !f.On && f.Reason == "off":
		state = "off (bpfperfd --profile.filter=false): every sample reaches the daemon"
	case !f.On:
		state = "off (" + f.Reason + "): every sample reaches the daemon"
	}
	return fmt.Sprintf("%s; %d samples passed, %d dropped in the kernel since start; %d pages of BPF code", state, f.Passed, f.Dropped, f.Pages)
}
