// Command vmtest runs a package's tests inside the test VM (see package
// vmtest) and exits with their exit code. Arguments after the flags go to
// the test binary:
//
//	go run ./internal/vmtest/cmd/vmtest -pkg ./collectors -- -test.run '^TestCountersExact' -test.v
//
// -kernel 6.12 boots Debian's 6.12 in place of 6.1. With -prepare it only
// installs the packages and fetches both kernels.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/bpfperf/bpfperf/internal/vmtest"
)

func main() {
	pkg := flag.String("pkg", ".", "directory of the package whose tests run in the VM")
	timeout := flag.Duration("timeout", 2*time.Minute, "limit for boot, tests and power-off")
	cache := flag.String("cache", "", "kernel cache directory (default /var/cache/bpfperf-vm)")
	quiet := flag.Bool("quiet", false, "print only the test output, not the whole console")
	series := flag.String("kernel", "6.1", "Debian kernel series to boot: 6.1 or 6.12")
	prepare := flag.Bool("prepare", false, "only install qemu and busybox-static and fetch the kernels, then exit")
	flag.Parse()
	if *prepare {
		os.Exit(prepareVM(*cache))
	}
	s := map[string]*vmtest.Series{"6.1": vmtest.Kernel61, "6.12": vmtest.Kernel612}[*series]
	if s == nil {
		fmt.Fprintf(os.Stderr, "vmtest: -kernel %q: want 6.1 or 6.12\n", *series)
		os.Exit(2)
	}
	os.Exit(run(*pkg, vmtest.Config{CacheDir: *cache, Timeout: *timeout, Series: s}, *quiet, flag.Args()))
}

func prepareVM(cache string) int {
	if cache == "" {
		cache = vmtest.DefaultCacheDir()
	}
	if err := vmtest.EnsureTools(); err != nil {
		fmt.Fprintln(os.Stderr, "vmtest:", err)
		return 2
	}
	for _, s := range []*vmtest.Series{vmtest.Kernel61, vmtest.Kernel612} {
		kernel, err := vmtest.EnsureKernel(cache, s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "vmtest:", err)
			return 2
		}
		fmt.Println(kernel)
	}
	return 0
}

func run(pkg string, cfg vmtest.Config, quiet bool, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.MkdirTemp("", "bpfperf-vmtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "vmtest:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "pkg.test")
	if err := vmtest.BuildTestBinary(pkg, bin); err != nil {
		fmt.Fprintln(os.Stderr, "vmtest:", err)
		return 2
	}
	if _, err := os.Stat(filepath.Join(pkg, "testdata")); err == nil {
		files, err := vmtest.DirFiles(filepath.Join(pkg, "testdata"), "pkg/testdata")
		if err != nil {
			fmt.Fprintln(os.Stderr, "vmtest:", err)
			return 2
		}
		cfg.Files = files
	}
	if !quiet {
		cfg.Console = os.Stdout
	}
	res, err := vmtest.Run(ctx, cfg, bin, args...)
	if quiet && res != nil {
		fmt.Print(res.Output)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vmtest:", err)
		return 2
	}
	fmt.Fprintf(os.Stderr, "vmtest: exit code %d, boot %s, total %s\n", res.ExitCode, res.Boot.Round(time.Millisecond), res.Total.Round(time.Millisecond))
	return res.ExitCode
}
