package top

import (
	"fmt"
	"strconv"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// Report is one refresh of top, for --once: the header's numbers and the
// programs with top's own rates.
type Report struct {
	Time          time.Time   `json:"time"`
	Host          string      `json:"host"`
	Kernel        string      `json:"kernel"`
	StatsMode     string      `json:"stats_mode"`
	BPFCPUPercent *float64    `json:"bpf_cpu_percent,omitempty"`
	Daemon        ReportCost  `json:"daemon"`
	Programs      []ReportRow `json:"programs"`
}

// ReportCost is the daemon's own cost, as it reports it.
type ReportCost struct {
	Version    string  `json:"version"`
	CPUPercent float64 `json:"cpu_percent"`
	RSSBytes   int64   `json:"rss_bytes"`
}

// ReportRow is the API's row at the second reading, with its rates replaced
// by top's: over PeriodMs between the daemon's two readings. A program
// first seen at the second reading keeps the daemon's rates and has no
// period.
type ReportRow struct {
	api.ProgRow
	PeriodMs float64 `json:"period_ms,omitempty"`
}

// OnceOptions say how to take the report.
type OnceOptions struct {
	Host, Kernel string
	Interval     time.Duration // between the two readings
	Sort         string
	Reverse      bool
	Filter       string
	Sleep        func(time.Duration) // nil is time.Sleep
	Now          func() time.Time    // nil is time.Now
}

// Once reads the daemon twice, Interval apart, and returns the rows as top
// would show them. If the daemon has not read the kernel again by then
// (its interval is longer), it waits up to one more daemon interval.
func Once(src Source, o OnceOptions) (Report, error) {
	sleep, now := o.Sleep, o.Now
	if sleep == nil {
		sleep = time.Sleep
	}
	if now == nil {
		now = time.Now
	}
	if o.Sort == "" {
		o.Sort = "cpu"
	}
	col, err := ColumnByKey(o.Sort)
	if err != nil {
		return Report{}, err
	}
	first, err := src.Progs(false)
	if err != nil {
		return Report{}, err
	}
	var t Table
	t.Update(first, now())
	sleep(o.Interval)
	st, err := src.Status()
	if err != nil {
		return Report{}, err
	}
	deadline := now().Add(time.Duration(st.IntervalMs)*time.Millisecond + time.Second)
	for {
		progs, err := src.Progs(false)
		if err != nil {
			return Report{}, err
		}
		if newer(progs, first) || !now().Before(deadline) {
			t.Update(progs, now())
			break
		}
		sleep(min(o.Interval, 100*time.Millisecond))
	}
	if st, err = src.Status(); err != nil {
		return Report{}, err
	}
	rows := Filter(t.Rows(), o.Filter)
	Sort(rows, col, o.Reverse)
	rep := Report{
		Time: now(), Host: o.Host, Kernel: o.Kernel, StatsMode: st.StatsMode,
		Daemon:   ReportCost{Version: st.Version, CPUPercent: st.CPUPercent, RSSBytes: st.RSSBytes},
		Programs: make([]ReportRow, len(rows)),
	}
	if st.Hostname != "" {
		rep.Host, rep.Kernel = st.Hostname, st.KernelRelease
	}
	total, any := 0.0, false
	for i, r := range rows {
		out := ReportRow{ProgRow: r.ProgRow, PeriodMs: float64(r.Period().Microseconds()) / 1000}
		out.Rates = api.Rates{RunsPerSec: api.Optional(r.RunsPerSec()), AvgNsPerRun: api.Optional(r.AvgNs()), CPUPercent: api.Optional(r.CPUPercent())}
		out.AvgNsSinceLoad = api.Optional(r.AvgNsSinceLoad())
		if v, ok := r.CPUPercent(); ok {
			total, any = total+v, true
		}
		rep.Programs[i] = out
	}
	if any {
		rep.BPFCPUPercent = &total
	}
	return rep, nil
}

// newer reports whether the daemon has read any program since first.
func newer(progs, first []api.ProgRow) bool {
	if len(progs) == 0 {
		return true
	}
	var last time.Time
	for i := range first {
		if first[i].LastSample.After(last) {
			last = first[i].LastSample
		}
	}
	for i := range progs {
		if progs[i].LastSample.After(last) {
			return true
		}
	}
	return false
}

// Table renders the report for -o table and csv: the columns the view
// shows (optional ones only when some row has them), then for CSV the raw
// counters. Header and Fields are the titles and CSV names.
func (r *Report) Table() (header, fields []string, rows, raw [][]string) {
	trows := make([]*Row, len(r.Programs))
	for i := range r.Programs {
		p := &r.Programs[i]
		trows[i] = &Row{ProgRow: p.ProgRow}
		// The rates are already top's: keep them as the row's.
	}
	cols := Visible(trows)
	for _, c := range cols {
		header = append(header, c.Title)
		fields = append(fields, c.Field)
	}
	fields = append(fields, "tag", "run_cnt", "run_time_ns", "recursion_misses", "period_ms")
	for i, tr := range trows {
		var row, rawRow []string
		for _, c := range cols {
			row = append(row, c.Cell(tr))
			rawRow = append(rawRow, c.Raw(tr))
		}
		p := &r.Programs[i]
		rawRow = append(rawRow, p.Tag, strconv.FormatUint(p.RunCnt, 10), strconv.FormatUint(p.RunTimeNs, 10),
			strconv.FormatUint(p.RecursionMisses, 10), strconv.FormatFloat(p.PeriodMs, 'f', -1, 64))
		rows = append(rows, row)
		raw = append(raw, rawRow)
	}
	return header, fields, rows, raw
}

// Summary is the one line above the table: the header of the view.
func (r *Report) Summary() string {
	total := "-"
	if r.BPFCPUPercent != nil {
		total = FmtPercent(*r.BPFCPUPercent, true)
	}
	return fmt.Sprintf("host %s · kernel %s · stats %s · BPF CPU %s · bpfperfd %s CPU %s · %d programs",
		r.Host, r.Kernel, r.StatsMode, total, FmtPercent(r.Daemon.CPUPercent, true), FmtBytes(r.Daemon.RSSBytes), len(r.Programs))
}
