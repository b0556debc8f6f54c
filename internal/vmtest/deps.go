package vmtest

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/bpfperf/bpfperf/internal/debpkg"
)

// Arch is a guest architecture the harness boots.
type Arch string

const (
	AMD64 Arch = "amd64" // qemu-system-x86_64; the default
	// ARM64 boots qemu-system-aarch64's virt machine, whose emulated
	// PMUv3 Linux's armv8_pmuv3 driver serves: the one place here where
	// hardware perf events open.
	ARM64 Arch = "arm64"
)

// Packages are the Debian packages the harness needs on the host, per
// guest architecture. The arm64 guest's busybox comes from the arm64
// archive (EnsureBusybox), not from the host's busybox-static.
var Packages = map[Arch][]string{
	AMD64: {"qemu-system-x86", "busybox-static"},
	ARM64: {"qemu-system-arm"},
}

// EnsureTools installs Packages[arch] with apt-get when one is missing. It
// does nothing when all are installed.
func EnsureTools(arch Arch) error {
	pkgs, ok := Packages[arch]
	if !ok {
		return fmt.Errorf("vm arch %q: want amd64 or arm64", arch)
	}
	return debpkg.Ensure("vm", pkgs...)
}

// Series is a line of Debian kernels the harness boots, for each
// architecture: the package to download and the image it leaves in the
// cache, each with the update number (ABI or patch level) in group 1, so
// the newest wins.
type Series struct {
	Name string
	arch map[Arch]seriesNames
}

type seriesNames struct {
	pkgRE   *regexp.Regexp // also the apt-cache search pattern: POSIX ERE-safe
	imageRE *regexp.Regexp
}

var (
	// Kernel61 is bookworm's stock kernel, the default: it allows
	// fentry/fexit, which the host kernel refuses. On arm64 its cloud
	// flavour (no ftrace direct calls there: fentry on BPF programs
	// works, on kernel functions it does not).
	Kernel61 = &Series{"6.1", map[Arch]seriesNames{
		AMD64: {regexp.MustCompile(`^linux-image-6\.1\.0-([0-9]+)-amd64-unsigned$`),
			regexp.MustCompile(`^vmlinuz-6\.1\.0-([0-9]+)-amd64$`)},
		ARM64: {regexp.MustCompile(`^linux-image-6\.1\.0-([0-9]+)-cloud-arm64-unsigned$`),
			regexp.MustCompile(`^vmlinuz-6\.1\.0-([0-9]+)-cloud-arm64$`)},
	}}
	// Kernel612 is bookworm's 6.12 in its cloud flavour (34 MB, boots in
	// 3 s): kprobes and fprobe, which the host kernel lacks, and the
	// kernel's missed counts for kprobe links (6.7 and later).
	Kernel612 = &Series{"6.12", map[Arch]seriesNames{
		AMD64: {regexp.MustCompile(`^linux-image-6\.12\.([0-9]+)\+deb12-cloud-amd64-unsigned$`),
			regexp.MustCompile(`^vmlinuz-6\.12\.([0-9]+)\+deb12-cloud-amd64$`)},
		ARM64: {regexp.MustCompile(`^linux-image-6\.12\.([0-9]+)\+deb12-cloud-arm64-unsigned$`),
			regexp.MustCompile(`^vmlinuz-6\.12\.([0-9]+)\+deb12-cloud-arm64$`)},
	}}
)

// names returns the series' patterns for arch.
func (s *Series) names(arch Arch) (seriesNames, error) {
	n, ok := s.arch[arch]
	if !ok {
		return seriesNames{}, fmt.Errorf("vm kernel %s: none for arch %q", s.Name, arch)
	}
	return n, nil
}

// EnsureKernel returns the newest image of series s for arch from
// cacheDir. When the cache holds none, it downloads the newest package of
// the series with apt-get download (from the arm64 archive through a
// private apt configuration for arm64, see aptFor), extracts
// /boot/vmlinuz-* and drops the package. Set BPFPERF_VM_KERNEL to boot
// another image in place of Kernel61 on amd64.
func EnsureKernel(cacheDir string, arch Arch, s *Series) (string, error) {
	if k := os.Getenv("BPFPERF_VM_KERNEL"); k != "" && s == Kernel61 && arch == AMD64 {
		return k, nil
	}
	names, err := s.names(arch)
	if err != nil {
		return "", err
	}
	if k := names.newestCached(cacheDir); k != "" {
		return k, nil
	}
	// apt-get download runs in the cache: a fresh host has none yet.
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("vm cache: %w", err)
	}
	unlock, err := debpkg.Lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	if k := names.newestCached(cacheDir); k != "" {
		return k, nil // another process fetched it while we waited
	}
	a, err := aptFor(cacheDir, arch)
	if err != nil {
		return "", err
	}
	pkg, err := names.newestPackage(a)
	if err != nil {
		return "", err
	}
	deb, err := a.download(cacheDir, pkg)
	if err != nil {
		return "", err
	}
	defer os.Remove(deb)
	return extractFile(deb, cacheDir, func(path string) (string, bool) {
		name := filepath.Base(path)
		return name, strings.HasPrefix(path, "/boot/") && names.imageRE.MatchString(name)
	})
}

// EnsureBusybox returns a static busybox for the guest of arch: the
// host's (busybox-static) on amd64; on arm64 the one in the arm64
// archive's busybox-static, downloaded once into cacheDir.
func EnsureBusybox(cacheDir string, arch Arch) (string, error) {
	if arch == AMD64 {
		return "/bin/busybox", nil
	}
	name := "busybox-" + string(arch)
	path := filepath.Join(cacheDir, name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	unlock, err := debpkg.Lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	a, err := aptFor(cacheDir, arch)
	if err != nil {
		return "", err
	}
	deb, err := a.download(cacheDir, "busybox-static")
	if err != nil {
		return "", err
	}
	defer os.Remove(deb)
	return extractFile(deb, cacheDir, func(path string) (string, bool) {
		return name, path == "/bin/busybox"
	})
}

// aptConfig runs apt-get and apt-cache for one architecture's archive:
// the host's own for amd64 (conf empty), and for another a private
// configuration in the cache (its own lists and state, the host's
// sources), so that packages of that architecture download on this host
// without adding the architecture to dpkg.
type aptConfig struct {
	arch Arch
	conf string // APT_CONFIG file; empty for the host's
}

// aptFor returns the apt of arch, writing its private configuration
// under cacheDir on first use. Call it with lockApt held.
func aptFor(cacheDir string, arch Arch) (*aptConfig, error) {
	if arch == AMD64 {
		return &aptConfig{arch: arch}, nil
	}
	dir, err := filepath.Abs(filepath.Join(cacheDir, "apt-"+string(arch)))
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"lists/partial", "archives/partial"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("vm apt %s: %w", arch, err)
		}
	}
	status := filepath.Join(dir, "status")
	if err := os.WriteFile(status, nil, 0o644); err != nil {
		return nil, fmt.Errorf("vm apt %s: %w", arch, err)
	}
	// The sandbox user _apt cannot write into a root-only cache, and
	// nothing here is installed: root downloads.
	conf := fmt.Sprintf(`APT::Architecture "%[1]s";
APT::Architectures { "%[1]s"; };
APT::Sandbox::User "root";
Dir::State "%[2]s";
Dir::State::Lists "%[2]s/lists";
Dir::State::status "%[3]s";
Dir::Cache "%[2]s";
Dir::Cache::Archives "%[2]s/archives";
`, arch, dir, status)
	path := filepath.Join(dir, "apt.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("vm apt %s: %w", arch, err)
	}
	return &aptConfig{arch: arch, conf: path}, nil
}

func (a *aptConfig) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if a.conf != "" {
		cmd.Env = append(cmd.Env, "APT_CONFIG="+a.conf)
	}
	return cmd
}

// update refreshes the package lists: the host's as root only (it needs
// no update to read them otherwise), a private configuration's always.
func (a *aptConfig) update() error {
	if a.conf == "" && os.Geteuid() != 0 {
		return nil
	}
	if b, err := a.command("apt-get", "update", "-qq").CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update (%s): %w\n%s", a.arch, err, b)
	}
	return nil
}

// search lists the package names apt-cache finds for an ERE.
func (a *aptConfig) search(re *regexp.Regexp) ([]string, error) {
	out, err := a.command("apt-cache", "search", "--names-only", re.String()).Output()
	if err != nil {
		return nil, fmt.Errorf("apt-cache search (%s): %w", a.arch, err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(line, " ")
		if re.MatchString(name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// download fetches pkg's .deb into dir and returns its path; a private
// configuration's lists are fetched first when it has none.
func (a *aptConfig) download(dir, pkg string) (string, error) {
	dl := func() error {
		cmd := a.command("apt-get", "download", "-qq", pkg)
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get download %s (%s): %w\n%s", pkg, a.arch, err, b)
		}
		return nil
	}
	err := dl()
	if err != nil && a.conf != "" {
		if err = a.update(); err == nil {
			err = dl()
		}
	}
	if err != nil {
		return "", err
	}
	debs, _ := filepath.Glob(filepath.Join(dir, pkg+"_*_"+string(a.arch)+".deb"))
	if len(debs) == 0 {
		return "", fmt.Errorf("apt-get download %s left no .deb in %s", pkg, dir)
	}
	return debs[0], nil
}

// number is the update number a name of the series carries.
func number(re *regexp.Regexp, name string) int {
	v, _ := strconv.Atoi(re.FindStringSubmatch(name)[1])
	return v
}

func (s seriesNames) newestCached(cacheDir string) string {
	entries, _ := os.ReadDir(cacheDir)
	best, bestN := "", -1
	for _, e := range entries {
		if s.imageRE.MatchString(e.Name()) {
			if n := number(s.imageRE, e.Name()); n > bestN {
				best, bestN = filepath.Join(cacheDir, e.Name()), n
			}
		}
	}
	return best
}

func (s seriesNames) newestPackage(a *aptConfig) (string, error) {
	names, err := a.search(s.pkgRE)
	if err == nil && len(names) == 0 {
		if err = a.update(); err == nil {
			names, err = a.search(s.pkgRE)
		}
	}
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no package matching %s in apt for %s (Debian bookworm sources needed)", s.pkgRE, a.arch)
	}
	return slices.MaxFunc(names, func(a, b string) int { return number(s.pkgRE, a) - number(s.pkgRE, b) }), nil
}

// extractFile copies the first file of a .deb that want accepts (given
// its path from /, it returns the name to keep it under in dir) into dir.
func extractFile(deb, dir string, want func(path string) (string, bool)) (string, error) {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("dpkg-deb: %w", err)
	}
	defer cmd.Wait()
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", fmt.Errorf("%s has no file wanted here", deb)
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", deb, err)
		}
		name, ok := want(strings.TrimPrefix(h.Name, "."))
		if !ok || h.Typeflag != tar.TypeReg {
			continue
		}
		dst := filepath.Join(dir, name)
		tmp := dst + ".tmp"
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, h.FileInfo().Mode().Perm())
		if err != nil {
			return "", err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Close(); err != nil {
			return "", err
		}
		io.Copy(io.Discard, out) // let dpkg-deb finish
		return dst, os.Rename(tmp, dst)
	}
}
