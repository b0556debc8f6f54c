package main

import (
	"encoding/csv"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// bpfperf bench hooks as a user runs it: a CSV row per hook with its
// figures, a refused hook as one line and a non-zero exit when nothing
// could be measured, and a bad flag as one line.
func TestBenchHooksCLI(t *testing.T) {
	privtest.Root(t)
	// The tracepoint hook is found through tracefs: on a fresh machine
	// nothing has mounted it unless a test before this one did.
	privtest.Tracefs(t)
	buildTop(t)
	out, errOut, code := runCLI("bench", "hooks", "--hook", "tracepoint", "--rounds", "2", "--syscalls", "20000", "-o", "csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("want a header and one row, got %q (%v)", out, err)
	}
	head, row := rows[0], rows[1]
	get := func(field string) string {
		for i, f := range head {
			if f == field {
				return row[i]
			}
		}
		t.Fatalf("no %s column in %v", field, head)
		return ""
	}
	if get("hook") != "tracepoint" || get("runs_per_event") != "1.0000" || get("unavailable") != "" {
		t.Errorf("tracepoint row %v, want 1.0000 runs per event and nothing unavailable", row)
	}

	for _, bad := range [][]string{
		{"--hook", "nope"},
		{"--rounds", "0"},
		{"--cpu", "-1"},
	} {
		_, errOut, code := runCLI(append([]string{"bench", "hooks"}, bad...)...)
		if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.HasPrefix(errOut, "bpfperf: ") {
			t.Errorf("bench hooks %v: exit %d, stderr %q: want one line and a non-zero exit", bad, code, errOut)
		}
	}
}
