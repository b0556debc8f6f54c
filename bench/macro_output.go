package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// writeMacroTable is WriteTable for a stat report: per program, what it
// did over the command's runs, medians with the IQR over runs where there
// were several.
func writeMacroTable(w io.Writer, rep *Report) error {
	m := rep.Macro
	fp := rep.Fingerprint
	runs := "1 run"
	if m.Runs != 1 {
		runs = fmt.Sprintf("%d runs", m.Runs)
	}
	fmt.Fprintf(w, "%s of %s: wall %s (median), readings every %s from %s\n", runs, m.what(),
		time.Duration(m.Wall.Median*1e9).Round(time.Millisecond), time.Duration(m.IntervalMS*1e6), m.Source)
	if fp.Kernel != "" {
		fmt.Fprintf(w, "kernel %s, %d x %s, bpf_stats %s\n", fp.Kernel, fp.CPUs, fp.CPUModel, fp.Stats)
	}
	fmt.Fprintln(w)
	if len(rep.Results) == 0 {
		fmt.Fprintln(w, "no BPF program ran")
		return nil
	}
	sampled := false
	for _, r := range rep.Results {
		sampled = sampled || r.Macro.SampledCPUPercent != nil
	}
	width := len("program")
	for _, r := range rep.Results {
		width = max(width, len(macroLabel(r)))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := fmt.Sprintf("%-*s\tid\truns\trun time\tns/run\truns/s\tCPU %%\t", width, "program")
	if sampled {
		head += "sampled %\t"
	}
	fmt.Fprintln(tw, head+"misses\t")
	var notes []string
	for _, r := range rep.Results {
		mr := r.Macro
		ids := make([]string, len(mr.IDs))
		for i, id := range mr.IDs {
			ids[i] = fmt.Sprint(id)
		}
		nsRun := "-"
		if r.Summary.N > 0 {
			nsRun = spreadText(r.Summary.Median, r.Summary.IQR, m.Runs, "%.1f")
		}
		row := fmt.Sprintf("%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t", width, macroLabel(r), strings.Join(ids, ","),
			spreadText(mr.Runs.Median, mr.Runs.IQR, m.Runs, "%.0f"),
			runTimeText(mr.RunTimeNs.Median), nsRun,
			compact(mr.RunsPerSecond.Median), spreadText(mr.CPUPercent.Median, mr.CPUPercent.IQR, m.Runs, "%.3f"))
		if sampled {
			if s := mr.SampledCPUPercent; s != nil {
				row += spreadText(s.Median, s.IQR, m.Runs, "%.3f") + "\t"
			} else {
				row += "-\t"
			}
		}
		fmt.Fprintln(tw, row+fmt.Sprintf("%.0f\t", mr.RecursionMisses.Median))
		switch {
		case mr.Loaded && mr.Unloaded:
			notes = append(notes, r.Name+": loaded and unloaded during the command; runs after its last reading are not counted")
		case mr.Unloaded:
			notes = append(notes, r.Name+": unloaded during the command; runs after its last reading are not counted")
		case mr.Loaded:
			notes = append(notes, r.Name+": loaded during the command")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nCPU % is of one CPU over the wall time (bpftop's convention); run time and ns/run come from the kernel's run-time stats")
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

// macroLabel is how the table names a result's program: its type and full
// name, "#2" after the name of a second program of that type and name.
func macroLabel(r Result) string {
	if label, ok := strings.CutPrefix(r.Name, "stat/"); ok {
		return label
	}
	return r.Macro.Type + "/" + r.Macro.Name
}

// spreadText is a median, with ±IQR when there were several runs.
func spreadText(median, iqr float64, runs int, format string) string {
	s := fmt.Sprintf(format, median)
	if runs > 1 {
		s += " ±" + fmt.Sprintf(format, iqr)
	}
	return s
}

// runTimeText is a run time to a precision a reader can take in: 30.026ms,
// not 30.026045ms.
func runTimeText(ns float64) string {
	d := time.Duration(ns)
	if d >= time.Millisecond {
		d = d.Round(time.Microsecond)
	}
	return d.String()
}
