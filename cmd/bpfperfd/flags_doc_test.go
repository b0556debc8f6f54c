package main

import (
	"flag"
	"testing"

	"github.com/bpfperf/bpfperf/internal/clidoc"
)

var updateFlagsDoc = flag.Bool("update", false, "rewrite this command's section of docs/flags.md from its flag definitions")

// TestFlagsDoc fails when docs/flags.md no longer says what bpfperfd's flags
// are; `make docs` (this test with -update) rewrites it.
func TestFlagsDoc(t *testing.T) {
	if err := clidoc.Check("../../docs/flags.md", newApp(), *updateFlagsDoc); err != nil {
		t.Fatal(err)
	}
}
