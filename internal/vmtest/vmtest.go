// Package vmtest runs a Go test binary inside a throw-away VM: Debian's
// stock 6.1 kernel (or its 6.12, Config.Series) under qemu (TCG), a busybox-static initramfs, and the
// binary built with CGO_ENABLED=0. It is for tests of what the host kernel
// refuses or lacks (fentry/fexit, hardware-free perf counters through
// tracing programs, kprobes), and, in the arm64 guest (Config.Arch), for
// hardware perf events: QEMU's emulated PMUv3 under Linux's own driver,
// exact under Config.Exact. Inside the VM BPFPERF_IN_VM=1 and BPFPERF_REQUIRE_PRIVILEGED=1
// are set, so gated tests run and privileged tests must not skip.
//
// Only one VM runs at a time per host: Run takes a file lock.
package vmtest

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// InVMEnv is set to "1" inside the VM.
const InVMEnv = "BPFPERF_IN_VM"

// InVM reports whether the code runs inside the test VM.
func InVM() bool { return os.Getenv(InVMEnv) == "1" }

// ICountEnv is set inside an Exact VM to the icount shift: each guest
// instruction advances the virtual clock by 2^shift ns, so the PMU's
// cycle counter (a 1 GHz virtual clock) reads instructions << shift.
const ICountEnv = "BPFPERF_VM_ICOUNT_SHIFT"

// ICountShift is the shift an Exact VM runs under: one instruction, two
// ns, two cycles. Not 0, where cycles and instructions read the same and
// a test could not tell one event from the other.
const ICountShift = 1

// ICount returns the icount shift inside an Exact VM, and ok false
// elsewhere: only there do instruction counts equal the instructions run.
func ICount() (shift int, ok bool) {
	v := os.Getenv(ICountEnv)
	if v == "" {
		return 0, false
	}
	shift, err := strconv.Atoi(v)
	return shift, err == nil
}

// Config says how to boot the VM. The zero value works.
type Config struct {
	CacheDir string  // kernel cache; default $BPFPERF_VM_CACHE or /var/cache/bpfperf-vm
	Arch     Arch    // guest architecture; default AMD64
	Kernel   string  // a kernel image to boot; default: the newest of Series, downloaded once
	Series   *Series // Debian kernel series; default Kernel61
	Busybox  string  // a static busybox for Arch; default: EnsureBusybox's
	Memory   string  // qemu -m; default 1G
	CPUs     int     // qemu -smp; default 2 (1 when Exact)
	// Exact runs one vCPU under QEMU's instruction counting (-icount
	// shift=ICountShift,sleep=off; arm64 only): the PMU's instruction
	// counts are then exact at every read and cycles are instructions <<
	// shift, for counter proofs. icount is one count for all vCPUs, hence
	// the one vCPU; and it is slower than multi-threaded TCG.
	Exact   bool
	Timeout time.Duration // for boot, test and power-off; default 2m
	// BootTimeout bounds qemu start to the test binary's start; a boot
	// that takes longer is killed and tried again, up to bootTries times
	// in all. Default 90s (a boot takes about 8s, 16 CPUs included).
	BootTimeout time.Duration
	Env         []string  // more KEY=VALUE for the test binary
	Files       []File    // more files for the initramfs (e.g. testdata)
	Console     io.Writer // gets the raw console as it arrives, if set

	// kernelArgs go after the harness's own on the kernel command line
	// (a later rdinit= wins): tests use it to make a boot fail.
	kernelArgs string
}

// DefaultCacheDir is $BPFPERF_VM_CACHE, or /var/cache/bpfperf-vm.
func DefaultCacheDir() string {
	if d := os.Getenv("BPFPERF_VM_CACHE"); d != "" {
		return d
	}
	return "/var/cache/bpfperf-vm"
}

func (c *Config) defaults() {
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir()
	}
	if c.Arch == "" {
		c.Arch = AMD64
	}
	if c.Series == nil {
		c.Series = Kernel61
	}
	if c.Memory == "" {
		c.Memory = "1G"
	}
	if c.CPUs == 0 {
		c.CPUs = 2
		if c.Exact {
			c.CPUs = 1
		}
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.BootTimeout == 0 {
		c.BootTimeout = 90 * time.Second
	}
}

// bootTries is how many boots Run tries before it gives up: TCG with
// many vCPUs on a loaded 2-core host sometimes hangs before init (CI saw a
// 16-CPU boot print nothing past the BIOS for 4 minutes, then the same
// kernel boot in 8s), or the guest kernel dies in its own start-up (CI
// saw Debian's 6.1 take an int3 Oops in sched_clock_cpu during the
// initcalls, 2 s in, under multi-threaded TCG: its code patching racing
// the emulator). Neither has run any test yet, and a retried boot is
// cheaper than a red run.
const bootTries = 3

// lockupTries is how many runs Run tries when the guest kernel reports a
// soft lockup: CI once saw a kworker in Debian's 6.1 under TCG spin for
// 104 s in a run whose tests had all passed so far, and 200 runs of the
// same test here did not repeat it. softlockup_panic=1 ends such a run at
// once instead of at Config.Timeout; a second lockup fails the test.
const lockupTries = 2

// Result is what one VM run produced.
type Result struct {
	ExitCode int           // the test binary's exit code, read from the console
	Output   string        // the test binary's output, without kernel messages
	Console  string        // everything qemu printed
	Boot     time.Duration // qemu start to the test binary's start
	Total    time.Duration // qemu start to qemu exit
	// FailedBoots has, for each boot before this one that hung or died
	// before the test binary started, why and its console's tail.
	FailedBoots []string
	Lockups     []string // console tails of runs ended by a guest soft lockup before this one
	Oopses      []string // console tails of failed runs with an int3 Oops before this one
}

var (
	// ErrTimeout is returned when the VM did not power off in time.
	ErrTimeout = errors.New("vm timed out")
	// ErrNoExitCode is returned when the VM stopped without printing the
	// test binary's exit code (kernel panic, init failure, ...).
	ErrNoExitCode = errors.New("vm stopped without reporting an exit code")
	// errBootHung is one boot passing Config.BootTimeout; Run retries it.
	errBootHung = errors.New("vm boot hung")
	// errBootDied is the VM stopping before the test binary started (a
	// guest kernel panic in its own start-up); Run retries it.
	errBootDied = errors.New("vm stopped before the test binary started")
	// errLockup is the guest kernel's soft-lockup watchdog firing; Run
	// tries once more.
	errLockup = errors.New("guest kernel soft lockup")
	// errInt3Oops is a failed run whose guest kernel took an int3 Oops;
	// Run tries once more (see int3Tries).
	errInt3Oops = errors.New("guest kernel int3 Oops in a failed run")
)

// int3Oops is how the guest kernel reports hitting a breakpoint it did
// not place: under multi-threaded TCG, the kernel's own code patching
// (static keys flipped, kprobes armed: the int3 it writes first) races
// the emulator's translated code. CI saw Debian's 6.12 take one in
// kprobe_multi_link_prog_run mid-test, and 6.1 one in sched_clock_cpu at
// boot (bootTries). Other Oopses are not retried: they may be ours.
const int3Oops = "Oops: int3"

// int3Tries is how many runs Run tries when a run fails and its guest
// kernel took an int3 Oops: a second one fails the test.
const int3Tries = 2

// Console markers printed by the init script around the test binary.
const (
	startMarker = "BPFPERF-VM-START"
	exitMarker  = "BPFPERF-VM-EXIT="
)

var exitRE = regexp.MustCompile(exitMarker + `(\d+)`)

// Run boots the VM with binary as its test program, run with args, and
// waits for it to power off. Tools and kernel are installed first when
// missing (EnsureTools, EnsureKernel).
func Run(ctx context.Context, cfg Config, binary string, args ...string) (*Result, error) {
	cfg.defaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := EnsureTools(cfg.Arch); err != nil {
		return nil, err
	}
	kernel := cfg.Kernel
	if kernel == "" {
		var err error
		if kernel, err = EnsureKernel(cfg.CacheDir, cfg.Arch, cfg.Series); err != nil {
			return nil, err
		}
	}
	if cfg.Busybox == "" {
		var err error
		if cfg.Busybox, err = EnsureBusybox(cfg.CacheDir, cfg.Arch); err != nil {
			return nil, err
		}
	}
	work, err := os.MkdirTemp("", "bpfperf-vm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	initrd := filepath.Join(work, "initramfs.cpio")
	if err := buildInitramfs(initrd, cfg, binary, args); err != nil {
		return nil, err
	}

	unlock, err := lockVM(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	var failedBoots, lockups, oopses []string
	for {
		res, err := boot(ctx, cfg, kernel, initrd)
		res.FailedBoots, res.Lockups, res.Oopses = failedBoots, lockups, oopses
		switch {
		case (errors.Is(err, errBootHung) || errors.Is(err, errBootDied)) && len(failedBoots)+1 < bootTries:
			failedBoots = append(failedBoots, err.Error())
		case errors.Is(err, errLockup) && len(lockups)+1 < lockupTries:
			lockups = append(lockups, fromLine(res.Console, "soft lockup", 40))
		case errors.Is(err, errInt3Oops) && len(oopses)+1 < int3Tries:
			oopses = append(oopses, fromLine(res.Console, int3Oops, 40))
		default:
			return res, err
		}
	}
}

// arch is c.Arch or its default, before defaults runs.
func (c Config) arch() Arch {
	if c.Arch == "" {
		return AMD64
	}
	return c.Arch
}

// check refuses a Config the harness cannot boot, in one line.
func (c *Config) check() error {
	if _, ok := Packages[c.Arch]; !ok {
		return fmt.Errorf("vm arch %q: want amd64 or arm64", c.Arch)
	}
	if c.Exact && c.Arch != ARM64 {
		return fmt.Errorf("vm exact mode needs arch arm64: the x86 guest has no PMU to count with")
	}
	if c.Exact && c.CPUs != 1 {
		return fmt.Errorf("vm exact mode runs 1 vCPU, not %d: icount is one count for all", c.CPUs)
	}
	return nil
}

// qemuArgs is the qemu command line for cfg.
func qemuArgs(cfg Config, kernel, initrd string) (string, []string) {
	common := []string{
		"-m", cfg.Memory, "-smp", strconv.Itoa(cfg.CPUs),
		"-nodefaults", "-nographic", "-serial", "stdio", "-no-reboot",
		"-kernel", kernel, "-initrd", initrd,
	}
	const append_ = "panic=-1 softlockup_panic=1 quiet loglevel=3 rdinit=/init "
	if cfg.Arch == ARM64 {
		// pauth-impdef: Debian's kernels sign return addresses, and
		// QEMU's default (architected QARMA) algorithm makes the guest
		// several times slower. The virt machine's device tree describes
		// the PMU; Debian's arm64 vmlinuz is a plain Image, booted with no
		// firmware.
		accel := "tcg,thread=multi"
		if cfg.Exact {
			// sleep=off: an idle vCPU's clock jumps to its next timer
			// rather than waiting for the host's.
			accel = "tcg"
			common = append(common, "-icount", fmt.Sprintf("shift=%d,sleep=off", ICountShift))
		}
		return "qemu-system-aarch64", append([]string{"-M", "virt", "-cpu", "max,pauth-impdef=on", "-accel", accel},
			append(common, "-append", "console=ttyAMA0 "+append_+cfg.kernelArgs)...)
	}
	// tsc=reliable: TCG's TSCs fail the kernel's sync check, and with an
	// unstable TSC sched_clock (hence cpu-clock) stands still for up to a
	// tick on one CPU.
	return "qemu-system-x86_64", append([]string{"-accel", "tcg,thread=multi", "-cpu", "max"},
		append(common, "-append", "console=ttyS0 "+append_+"tsc=reliable "+cfg.kernelArgs)...)
}

// boot runs qemu once, until it powers off, cfg.Timeout passes, or the
// test binary has not started by cfg.BootTimeout (errBootHung).
func boot(ctx context.Context, cfg Config, kernel, initrd string) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	name, args := qemuArgs(cfg, kernel, initrd)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	console := &consoleBuffer{start: time.Now(), w: cfg.Console}
	cmd.Stdout, cmd.Stderr = console, console
	var hung atomic.Bool
	watchdog := time.AfterFunc(cfg.BootTimeout, func() {
		if !console.hasStarted() {
			hung.Store(true)
			cancel()
		}
	})
	defer watchdog.Stop()
	res := &Result{ExitCode: -1}
	runErr := cmd.Run()
	res.Total = time.Since(console.start)
	res.Console = console.String()
	res.Output, res.Boot = console.output()
	if m := exitRE.FindStringSubmatch(res.Console); m != nil {
		res.ExitCode, _ = strconv.Atoi(m[1])
	}
	switch {
	case hung.Load():
		return res, fmt.Errorf("%w: the test binary had not started after %s; console ends with:\n%s", errBootHung, cfg.BootTimeout, tail(res.Console, 40))
	case strings.Contains(res.Console, "soft lockup"):
		return res, fmt.Errorf("%w; console from it:\n%s", errLockup, fromLine(res.Console, "soft lockup", 40))
	case res.ExitCode != 0 && strings.Contains(res.Console, int3Oops):
		return res, fmt.Errorf("%w (exit code %d); console from it:\n%s", errInt3Oops, res.ExitCode, fromLine(res.Console, int3Oops, 40))
	case ctx.Err() == context.DeadlineExceeded:
		return res, fmt.Errorf("%w after %s; console ends with:\n%s", ErrTimeout, cfg.Timeout, tail(res.Console, 40))
	case runErr != nil:
		return res, fmt.Errorf("qemu: %w; console ends with:\n%s", runErr, tail(res.Console, 40))
	case res.ExitCode < 0 && !console.hasStarted():
		return res, fmt.Errorf("%w; console ends with:\n%s", errBootDied, tail(res.Console, 40))
	case res.ExitCode < 0:
		return res, fmt.Errorf("%w; console ends with:\n%s", ErrNoExitCode, tail(res.Console, 40))
	}
	return res, nil
}

// consoleBuffer collects the console and notes when the test started.
type consoleBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	w       io.Writer
	start   time.Time
	started time.Duration
}

func (c *consoleBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if c.started == 0 && bytes.Contains(c.buf.Bytes(), []byte(startMarker)) {
		c.started = time.Since(c.start)
	}
	if c.w != nil {
		c.w.Write(p)
	}
	return len(p), nil
}

func (c *consoleBuffer) hasStarted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started != 0
}

func (c *consoleBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.ReplaceAll(c.buf.String(), "\r\n", "\n")
}

// output returns what the test binary printed, between the markers.
func (c *consoleBuffer) output() (string, time.Duration) {
	s := c.String()
	i := strings.Index(s, startMarker+"\n")
	if i < 0 {
		return "", 0
	}
	s = s[i+len(startMarker)+1:]
	if j := strings.Index(s, exitMarker); j >= 0 {
		s = s[:j]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return s, c.started
}

// fromLine is the console from the first line holding marker on, n lines
// at most: a soft lockup's stuck task and its stack, or an Oops and its
// trace, which what follows would push out of the tail.
func fromLine(s, marker string, n int) string {
	if i := strings.Index(s, marker); i >= 0 {
		s = s[strings.LastIndex(s[:i], "\n")+1:]
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		return strings.Join(lines[:min(n, len(lines))], "\n")
	}
	return tail(s, n)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lockVM serializes VMs on this host: TCG is heavy.
func lockVM(cacheDir string) (func(), error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("vm cache: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(cacheDir, "vm.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("vm lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("vm lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// initScript mounts what BPF tests need, runs the test binary and powers
// off. The exit code goes to the console: qemu exits 0 either way.
// cgroup2 is mounted alone at /sys/fs/cgroup, as on a pure cgroup2 host
// (the host CI runs on mounts it beside v1 controllers), and its root's
// cgroup.subtree_control is left unwritten, so that perf samples name the
// root cgroup and the profiler's /proc fallback is what the VM tests.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
ulimit -l unlimited
%s
cd /pkg
echo ` + startMarker + `
/test %s
echo ` + exitMarker + `$?
poweroff -f
`

func buildInitramfs(path string, cfg Config, binary string, args []string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("test binary: %w", err)
	}
	if err := checkBinary(binary, cfg.Arch); err != nil {
		return err
	}
	busybox, err := os.ReadFile(cfg.Busybox)
	if err != nil {
		return fmt.Errorf("busybox (apt-get install busybox-static): %w", err)
	}
	if err := checkBinary(cfg.Busybox, cfg.Arch); err != nil {
		return err
	}
	for _, f := range cfg.Files {
		if m, ok := elfMachine(f.Data); ok && m != machines[cfg.Arch] {
			return fmt.Errorf("vm file %s is built for %v: the %s guest cannot run it", f.Name, m, cfg.Arch)
		}
	}
	env := []string{InVMEnv + "=1", "BPFPERF_REQUIRE_PRIVILEGED=1", "TMPDIR=/tmp", "HOME=/tmp"}
	if cfg.Exact {
		env = append(env, ICountEnv+"="+strconv.Itoa(ICountShift))
	}
	env = append(env, cfg.Env...)
	var exports strings.Builder
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("vm env %q: want KEY=VALUE", kv)
		}
		fmt.Fprintf(&exports, "export %s=%s\n", k, shellQuote(v))
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	files := []File{
		{Name: "bin", Mode: fs.ModeDir | 0o755},
		{Name: "dev", Mode: fs.ModeDir | 0o755},
		// The kernel opens /dev/console for init before devtmpfs is mounted.
		{Name: "dev/console", Mode: fs.ModeDevice | fs.ModeCharDevice | 0o600, Major: 5, Minor: 1},
		{Name: "proc", Mode: fs.ModeDir | 0o755},
		{Name: "sys", Mode: fs.ModeDir | 0o755},
		{Name: "tmp", Mode: fs.ModeDir | 0o1777},
		{Name: "pkg", Mode: fs.ModeDir | 0o755},
		{Name: "bin/busybox", Mode: 0o755, Data: busybox},
		{Name: "init", Mode: 0o755, Data: fmt.Appendf(nil, initScript, exports.String(), strings.Join(quoted, " "))},
		{Name: "test", Mode: 0o755, Data: bin},
	}
	files = append(files, cfg.Files...)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteCPIO(f, files); err != nil {
		f.Close()
		return fmt.Errorf("initramfs: %w", err)
	}
	return f.Close()
}

// machines is the ELF machine of each guest architecture.
var machines = map[Arch]elf.Machine{AMD64: elf.EM_X86_64, ARM64: elf.EM_AARCH64}

// elfMachine is the machine of an ELF executable or shared object, ok
// false for anything else (scripts, data, BPF objects).
func elfMachine(data []byte) (elf.Machine, bool) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return 0, false
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return 0, false
	}
	return f.Machine, true
}

// checkBinary fails for a binary that is not a static executable for
// arch: the initramfs has no libc, and the guest runs only its own
// architecture.
func checkBinary(path string, arch Arch) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	if f.Machine != machines[arch] {
		return fmt.Errorf("%s is built for %v, not the %s guest", path, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// BuildTestBinary builds the tests of the package in pkgDir as a static
// binary for arch at out (CGO_ENABLED=0 GOARCH=arch go test -c).
func BuildTestBinary(pkgDir, out string, arch Arch) error {
	cmd := exec.Command("go", "test", "-c", "-o", out, ".")
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+string(arch))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go test -c in %s: %w\n%s", pkgDir, err, b)
	}
	return nil
}

// DirFiles returns the files under dir (e.g. a package's testdata) as
// initramfs entries under prefix.
func DirFiles(dir, prefix string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(filepath.Join(prefix, rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			files = append(files, File{Name: name, Mode: fs.ModeDir | info.Mode().Perm()})
		case info.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files = append(files, File{Name: name, Mode: info.Mode().Perm(), Data: b})
		}
		return nil
	})
	return files, err
}
