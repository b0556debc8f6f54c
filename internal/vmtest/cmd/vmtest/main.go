// Command vmtest runs a package's tests inside the test VM (see package
// vmtest) and exits with their exit code. Arguments after the flags go to
// the test binary:
//
//	go run ./internal/vmtest/cmd/vmtest -pkg ./collectors -- -test.run '^TestCountersExact' -test.v
//
// -kernel 6.12 boots Debian's 6.12 in place of 6.1; -arch arm64 boots the
// arm64 guest, and -exact runs it on one vCPU under icount (exact PMU
// counts). With -prepare it only installs the packages and fetches both
// kernels for both architectures.
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
	arch := flag.String("arch", "amd64", "guest architecture: amd64 or arm64")
	exact := flag.Bool("exact", false, "arm64 only: one vCPU under icount, so PMU counts are exact")
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
	if _, ok := vmtest.Packages[vmtest.Arch(*arch)]; !ok {
		fmt.Fprintf(os.Stderr, "vmtest: -arch %q: want amd64 or arm64\n", *arch)
		os.Exit(2)
	}
	cfg := vmtest.Config{CacheDir: *cache, Timeout: *timeout, Series: s, Arch: vmtest.Arch(*arch), Exact: *exact}
	os.Exit(run(*pkg, cfg, *quiet, flag.Args()))
}

func prepareVM(cache string) int {
	if cache == "" {
		cache = vmtest.DefaultCacheDir()
	}
	for _, arch := range []vmtest.Arch{vmtest.AMD64, vmtest.ARM64} {
		if err := vmtest.EnsureTools(arch); err != nil {
			fmt.Fprintln(os.Stderr, "vmtest:", err)
			return 2
		}
		bb, err := vmtest.EnsureBusybox(cache, arch)
		if err != nil {
			fmt.Fprintln(os.Stderr, "vmtest:", err)
			return 2
		}
		fmt.Println(bb)
		for _, s := range []*vmtest.Series{vmtest.Kernel61, vmtest.Kernel612} {
			kernel, err := vmtest.EnsureKernel(cache, arch, s)
			if err != nil {
				fmt.Fprintln(os.Stderr, "vmtest:", err)
				return 2
			}
			fmt.Println(kernel)
		}
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
	if err := vmtest.BuildTestBinary(pkg, bin, cfg.Arch); err != nil {
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
