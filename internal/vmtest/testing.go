package vmtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// RunTests builds the tests of the package in the current directory (the
// calling test's own package), boots the VM, runs them there with args
// (e.g. "-test.run", "^TestCountersExact"), logs their output and fails tb
// when they fail. The package's testdata, if any, goes along. It skips when
// already inside the VM and under -short, and needs root on the host
// (a skip that fails when BPFPERF_REQUIRE_PRIVILEGED=1).
func RunTests(tb testing.TB, cfg Config, args ...string) *Result {
	tb.Helper()
	if InVM() {
		tb.Skip("already inside the VM")
	}
	if testing.Short() {
		tb.Skip("boots a VM; skipped with -short")
	}
	if os.Geteuid() != 0 {
		privtest.Skip(tb, "booting the test VM needs root (apt-get, kernel cache)")
	}
	dir := tb.TempDir()
	bin := filepath.Join(dir, "pkg.test")
	if err := BuildTestBinary(".", bin); err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat("testdata"); err == nil {
		files, err := DirFiles("testdata", "pkg/testdata")
		if err != nil {
			tb.Fatal(err)
		}
		cfg.Files = append(cfg.Files, files...)
	}
	res, err := Run(context.Background(), cfg, bin, append([]string{"-test.v"}, args...)...)
	if res != nil {
		tb.Logf("VM: boot %s, total %s; test output:\n%s", res.Boot.Round(1e6), res.Total.Round(1e6), res.Output)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if res.ExitCode != 0 {
		tb.Fatalf("tests in the VM failed: exit code %d", res.ExitCode)
	}
	if strings.Contains(res.Output, "no tests to run") {
		tb.Fatalf("no test in the VM matched %q", args)
	}
	return res
}
