package hooks

import (
	"fmt"
	"strconv"

	"github.com/bpfperf/bpfperf/bench"
)

// Header names the columns of Rows, for people; Fields names them for
// CSV, as the JSON does.
var (
	Header = []string{"HOOK", "EVENT", "WITHOUT", "COST (STATS OFF)", "COST (STATS ON)", "RUN_TIME", "OUTSIDE RUN_TIME", "RUNS/EVENT"}
	Fields = []string{"hook", "event", "without_ns", "cost_ns", "cost_stats_ns", "run_ns", "outside_run_time_ns", "runs_per_event", "unavailable"}
)

// Rows are the results as table cells: each figure its median over the
// rounds and, where it is a difference, ± its interquartile range. A hook
// not measured says why in place of its figures.
func Rows(rs []Result) [][]string {
	var out [][]string
	for _, r := range rs {
		if r.Unavailable != "" {
			out = append(out, []string{r.Hook, r.Event, "not measured: " + r.Unavailable})
			continue
		}
		cost := spread(r.Cost)
		if r.StatsHeld {
			cost += " (stats held on)"
		}
		out = append(out, []string{r.Hook, r.Event, ns(r.Without.Median), cost, spread(r.CostStats),
			ns(r.Run.Median), spread(r.Outside), fmt.Sprintf("%.3f", r.RunsPerEvent)})
	}
	return out
}

// Raw are the results as CSV cells: plain medians.
func Raw(rs []Result) [][]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	var out [][]string
	for _, r := range rs {
		if r.Unavailable != "" {
			out = append(out, []string{r.Hook, r.Event, "", "", "", "", "", "", r.Unavailable})
			continue
		}
		out = append(out, []string{r.Hook, r.Event, f(r.Without.Median), f(r.Cost.Median), f(r.CostStats.Median),
			f(r.Run.Median), f(r.Outside.Median), strconv.FormatFloat(r.RunsPerEvent, 'f', 4, 64), ""})
	}
	return out
}

// Note says what the figures are, under the table.
func Note(rs []Result) string {
	rounds, seen, per := 0, map[string]bool{}, ""
	for _, r := range rs {
		if r.Unavailable != "" || seen[r.Event] {
			continue
		}
		seen[r.Event], rounds = true, r.Rounds
		if per != "" {
			per += ", "
		}
		per += fmt.Sprintf("%d of %s", r.Events, r.Event)
	}
	if rounds == 0 {
		return ""
	}
	return fmt.Sprintf("ns per event, medians over %d rounds (± the interquartile range) of %s each, "+
		"a round's time per event that of its quickest 1,000; "+
		"cost is the time per event with the program attached less the time without it", rounds, per)
}

func ns(v float64) string { return fmt.Sprintf("%.1f ns", v) }

func spread(s bench.Summary) string { return fmt.Sprintf("%.1f ± %.1f ns", s.Median, s.IQR) }
