package main

import (
	"slices"
	"strings"
	"testing"
)

func TestInterspersedFlags(t *testing.T) {
	app := newApp(nil)
	for in, want := range map[string]string{
		"bpfperf history xdp_pass --since 1h -o json":  "bpfperf history --since 1h -o json xdp_pass",
		"bpfperf --socket /s show 12 -o=csv":           "bpfperf --socket /s show -o=csv 12",
		"bpfperf progs --all -o json":                  "bpfperf progs --all -o json",
		"bpfperf history -o json p --step 10s -- -odd": "bpfperf history -o json --step 10s p -- -odd",
		"bpfperf show a b":                             "bpfperf show a b",
		"bpfperf --timeout 1s progs":                   "bpfperf --timeout 1s progs",
	} {
		got := strings.Join(interspersed(app, strings.Fields(in)), " ")
		if got != want {
			t.Errorf("%q\n got %q\nwant %q", in, got, want)
		}
	}
	if got := interspersed(app, nil); !slices.Equal(got, nil) {
		t.Errorf("nil args: %v", got)
	}
}
