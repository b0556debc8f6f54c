package vmtest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// skipUnlessHost skips where a VM cannot or need not boot: inside the VM,
// under -short, and without root (a skip that fails when
// BPFPERF_REQUIRE_PRIVILEGED=1).
func skipUnlessHost(tb testing.TB) {
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
}

// RunTests builds the tests of the package in the current directory (the
// calling test's own package), boots the VM, runs the tests named in tests
// there (exact names: -test.run "^(A|B)$") with args after them, logs their
// output and fails tb when they fail, or when any of them did not report
// "--- PASS: Name": a test renamed, skipped in the VM or never reached
// fails its runner instead of silently not running. With no tests (a
// benchmark runner) args must say what to run, and only the exit code is
// checked. The package's testdata, if any, goes along. It skips when
// already inside the VM and under -short, and needs root on the host
// (a skip that fails when BPFPERF_REQUIRE_PRIVILEGED=1).
func RunTests(tb testing.TB, cfg Config, tests []string, args ...string) *Result {
	tb.Helper()
	skipUnlessHost(tb)
	if len(tests) > 0 {
		args = append([]string{"-test.run", "^(" + strings.Join(tests, "|") + ")$"}, args...)
	}
	dir := tb.TempDir()
	bin := filepath.Join(dir, "pkg.test")
	if err := BuildTestBinary(".", bin, cfg.arch()); err != nil {
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
		for _, f := range res.FailedBoots {
			tb.Logf("VM: a boot failed before the test binary started and was tried again: %s", f)
		}
		for _, c := range res.Lockups {
			tb.Logf("VM: the guest kernel reported a soft lockup and the run was tried again; its console from there:\n%s", c)
		}
		for _, c := range res.Oopses {
			tb.Logf("VM: the run failed after the guest kernel took an int3 Oops (its code patching racing the emulator) and was tried again; its console from there:\n%s", c)
		}
	}
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
	if missing := NotPassed(res.Output, tests); len(missing) > 0 {
		tb.Fatalf("tests in the VM exited 0, but these did not report --- PASS: %s", strings.Join(missing, ", "))
	}
	return res
}

// NotPassed returns the names in tests for which a test binary's verbose
// output has no "--- PASS: Name (" line.
func NotPassed(output string, tests []string) []string {
	var missing []string
	for _, name := range tests {
		if !strings.Contains(output, "--- PASS: "+name+" (") {
			missing = append(missing, name)
		}
	}
	return missing
}

// BenchMetrics returns the metrics (unit → value) that the benchmark named
// name reported in a test binary's output, e.g. to report them again from
// a host benchmark that ran it in the VM. It returns nil when the
// benchmark's line is missing.
func BenchMetrics(output, name string) map[string]float64 {
	for _, line := range strings.Split(output, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || (fields[0] != name && !strings.HasPrefix(fields[0], name+"-")) {
			continue
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue // a log line naming the benchmark, not its result
		}
		m := make(map[string]float64)
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				break
			}
			m[fields[i+1]] = v
		}
		return m
	}
	return nil
}
