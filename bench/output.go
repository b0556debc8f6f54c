package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// Formats lists the output formats Write knows.
var Formats = []string{"table", "json", "csv", "bmf", "gobench"}

// Write renders rep in format.
func Write(w io.Writer, rep *Report, format string) error {
	switch format {
	case "table":
		return WriteTable(w, rep)
	case "json":
		return WriteJSON(w, rep)
	case "csv":
		return WriteCSV(w, rep)
	case "bmf":
		return WriteBMF(w, rep)
	case "gobench":
		return WriteGoBench(w, rep)
	}
	return fmt.Errorf("%w: unknown format %q (have %s)", ErrBadConfig, format, strings.Join(Formats, ", "))
}

// WriteTable writes a human-readable table with the fingerprint on top.
func WriteTable(w io.Writer, rep *Report) error {
	if rep.Macro != nil {
		return writeMacroTable(w, rep)
	}
	fp := rep.Fingerprint
	fmt.Fprintf(w, "kernel %s, %d x %s, jit_enable=%s jit_harden=%s, bpf_stats %s\n",
		fp.Kernel, fp.CPUs, fp.CPUModel, fp.JIT["bpf_jit_enable"], fp.JIT["bpf_jit_harden"], fp.Stats)
	fmt.Fprintf(w, "%d measurements per test, repeat %s, %.1fs\n\n",
		rep.Config.Measures, repeatText(rep.Config), rep.WallSeconds)
	width := len("test")
	for _, r := range rep.Results {
		width = max(width, len(r.Name)+len(" (noisy)"))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	events := rep.Config.Events
	fmt.Fprintf(tw, "%-*s\tmedian ns\tmean\tmin\tmax\tIQR\tstddev\tCV\trepeat\t%s\n", width, "test", eventHeader(events))
	var notes []string
	for _, r := range rep.Results {
		switch {
		case r.Error != "":
			fmt.Fprintf(tw, "%-*s\tFAILED\t\t\t\t\t\t\t\t\n", width, r.Name)
			notes = append(notes, r.Name+": FAILED: "+r.Error)
		case r.Skipped != "":
			fmt.Fprintf(tw, "%-*s\tskipped\t\t\t\t\t\t\t\t\n", width, r.Name)
			notes = append(notes, r.Name+": skipped: "+r.Skipped)
		default:
			s := r.Summary
			name := r.Name
			if r.Noisy {
				name += " (noisy)"
			}
			fmt.Fprintf(tw, "%-*s\t%.1f\t%.1f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f%%\t%d\t%s\n",
				width, name, s.Median, s.Mean, s.Min, s.Max, s.IQR, s.Stddev, 100*s.CV, r.Repeat, eventCells(r, events))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(events) > 0 {
		fmt.Fprintln(w, "\nevents per run, median, counted in kernel mode around each test-run call on its thread; (net) less the empty program of the same hook (baseline/TYPE) where it ran")
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

// eventHeader and eventCells are the table's columns of counted events:
// per run, with the net figure beside the gross one where there is one,
// then IPC when cycles and instructions were both counted.
func eventHeader(events []string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e + "/run\t")
	}
	if hasIPC(events) {
		b.WriteString("IPC\t")
	}
	return b.String()
}

// hasIPC says whether both events of IPC were counted.
func hasIPC(events []string) bool {
	return slices.Contains(events, perfevent.Cycles.String()) && slices.Contains(events, perfevent.Instructions.String())
}

func eventCells(r Result, events []string) string {
	var b strings.Builder
	for _, e := range events {
		s, ok := r.Events[e]
		switch {
		case !ok:
			b.WriteString("-")
		case r.EventsNet != nil:
			fmt.Fprintf(&b, "%s (net %s)", compact(s.Median), compact(r.EventsNet[e]))
		default:
			b.WriteString(compact(s.Median))
		}
		b.WriteString("\t")
	}
	if hasIPC(events) {
		if ipc, ok := r.IPC(); ok {
			fmt.Fprintf(&b, "%.2f", ipc)
		} else {
			b.WriteString("-")
		}
		b.WriteString("\t")
	}
	return b.String()
}

// compact prints a count per run: 12.3, 1234, 12.3k, 1.23M.
func compact(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func repeatText(c ReportConfig) string {
	if c.Repeat > 0 {
		return fmt.Sprint(c.Repeat)
	}
	return fmt.Sprintf("calibrated to %.1f ms per measurement", c.TargetMS)
}

// WriteJSON writes the whole report, measurements included; compare reads
// it back.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// ReadJSON reads a report written by WriteJSON.
// Its errors are *FileError (without the path, which the caller adds).
func ReadJSON(r io.Reader) (*Report, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var rep Report
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&rep); err != nil {
		fe := jsonError(b, err)
		fe.Kind = ErrBadConfig
		return nil, fe
	}
	return &rep, nil
}

// WriteCSV writes one row per test: timestamp, test, entry point, average
// ns (mean over all measurements), then the mean on each CPU the run used.
func WriteCSV(w io.Writer, rep *Report) error {
	cpus := rep.Config.CPUs
	header := []string{"timestamp", "test", "entry_point", "avg_ns"}
	if len(cpus) == 0 {
		header = append(header, "unpinned_ns")
	}
	for _, c := range cpus {
		header = append(header, fmt.Sprintf("cpu%d_ns", c))
	}
	for _, e := range rep.Config.Events {
		header = append(header, e+"_per_run", e+"_net_per_run")
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	ts := rep.Time.Format(time.RFC3339)
	for _, r := range rep.Results {
		if r.Error != "" || r.Skipped != "" {
			continue
		}
		row := []string{ts, r.Name, r.Entry, fmt.Sprintf("%.2f", r.Summary.Mean)}
		for _, run := range r.Runs {
			row = append(row, fmt.Sprintf("%.2f", run.Summary.Mean))
		}
		for _, e := range rep.Config.Events {
			gross, net := "", ""
			if s, ok := r.Events[e]; ok {
				gross = fmt.Sprintf("%.2f", s.Median)
			}
			if v, ok := r.EventsNet[e]; ok {
				net = fmt.Sprintf("%.2f", v)
			}
			row = append(row, gross, net)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteBMF writes Bencher Metric Format: per test, a "latency" measure in
// nanoseconds with the median as value and min/max as bounds, and one
// measure per counted event ("cycles", "instructions", ...) per run.
func WriteBMF(w io.Writer, rep *Report) error {
	type metric struct {
		Value float64 `json:"value"`
		Lower float64 `json:"lower_value"`
		Upper float64 `json:"upper_value"`
	}
	out := map[string]map[string]metric{}
	for _, r := range rep.Results {
		if r.Error != "" || r.Skipped != "" {
			continue
		}
		out[r.Name] = map[string]metric{"latency": {r.Summary.Median, r.Summary.Min, r.Summary.Max}}
		for e, es := range r.Events {
			out[r.Name][e] = metric{es.Median, es.Min, es.Max}
		}
		if m := r.Macro; m != nil {
			for name, s := range map[string]Spread{"runs": m.Runs, "runs_per_second": m.RunsPerSecond, "cpu_percent": m.CPUPercent} {
				out[r.Name][name] = metric{s.Median, s.Min, s.Max}
			}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteGoBench writes the Go benchmark format benchstat reads: the
// fingerprint as configuration lines, then one line per measurement.
func WriteGoBench(w io.Writer, rep *Report) error {
	fmt.Fprintln(w, "goos: linux")
	fmt.Fprintln(w, "pkg: bpfperf/bench")
	for _, l := range rep.Fingerprint.Lines() {
		fmt.Fprintln(w, l)
	}
	for _, r := range rep.Results {
		if r.Error != "" || r.Skipped != "" {
			continue
		}
		name := GoBenchName(r.Name)
		events := map[string][]float64{}
		for _, e := range rep.Config.Events {
			events[e] = r.EventMeasurements(e)
		}
		for i, m := range r.Measurements() {
			line := fmt.Sprintf("%s\t%d\t%.1f ns/op", name, macroRuns(r, i), m)
			for _, e := range rep.Config.Events {
				if v := events[e]; i < len(v) {
					line += fmt.Sprintf("\t%.1f %s/op", v[i], e)
				}
			}
			if _, err := fmt.Fprintln(w, line); err != nil {
				return err
			}
		}
	}
	return nil
}

// macroRuns is the N of measurement i's line: the test's repeat, or in a
// stat report the program's runs in that run of the command.
func macroRuns(r Result, i int) int {
	if r.Macro == nil {
		return r.Repeat
	}
	n := 0
	for _, s := range r.Macro.PerRun {
		if s.Runs > 0 {
			if n == i {
				return int(s.Runs)
			}
			n++
		}
	}
	return r.Repeat
}

// GoBenchName turns "maps/hash/lookup/size=1K" into
// "BenchmarkMaps/hash/lookup/size=1K": Go benchmark names have no spaces
// and start with Benchmark and an upper-case letter.
func GoBenchName(test string) string {
	test = strings.ReplaceAll(test, " ", "_")
	if test == "" {
		return "Benchmark"
	}
	return "Benchmark" + strings.ToUpper(test[:1]) + test[1:]
}

// testName inverts GoBenchName.
func testName(bench string) string {
	s := strings.TrimPrefix(bench, "Benchmark")
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// WriteList writes the tests, one a line, then the program types bench can
// run.
func WriteList(w io.Writer, tests []Test) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range tests {
		quick := ""
		if t.Quick {
			quick = "quick"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Entry, quick, t.Doc)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d tests. Program types with a timed test run: %s\n", len(tests), supportedList())
	return err
}
