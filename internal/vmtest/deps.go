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

// Packages are the Debian packages the harness needs on the host.
var Packages = []string{"qemu-system-x86", "busybox-static"}

// EnsureTools installs Packages with apt-get when one is missing. It does
// nothing when all are installed.
func EnsureTools() error { return debpkg.Ensure("vm", Packages...) }

// Series is a line of Debian kernels the harness boots: the package to
// download and the image it leaves in the cache, each with the update
// number (ABI or patch level) in group 1, so the newest wins.
type Series struct {
	Name    string
	pkgRE   *regexp.Regexp // also the apt-cache search pattern: POSIX ERE-safe
	imageRE *regexp.Regexp
}

var (
	// Kernel61 is bookworm's stock kernel, the default: it allows
	// fentry/fexit, which the host kernel refuses.
	Kernel61 = &Series{"6.1",
		regexp.MustCompile(`^linux-image-6\.1\.0-([0-9]+)-amd64-unsigned$`),
		regexp.MustCompile(`^vmlinuz-6\.1\.0-([0-9]+)-amd64$`)}
	// Kernel612 is bookworm's 6.12 in its cloud flavour (34 MB, boots in
	// 3 s): kprobes and fprobe, which the host kernel lacks, and the
	// kernel's missed counts for kprobe links (6.7 and later).
	Kernel612 = &Series{"6.12",
		regexp.MustCompile(`^linux-image-6\.12\.([0-9]+)\+deb12-cloud-amd64-unsigned$`),
		regexp.MustCompile(`^vmlinuz-6\.12\.([0-9]+)\+deb12-cloud-amd64$`)}
)

// EnsureKernel returns the newest image of series s from cacheDir. When the
// cache holds none, it downloads the newest package of the series with
// apt-get download, extracts /boot/vmlinuz-* and drops the package.
// Set BPFPERF_VM_KERNEL to boot another image in place of Kernel61.
func EnsureKernel(cacheDir string, s *Series) (string, error) {
	if k := os.Getenv("BPFPERF_VM_KERNEL"); k != "" && s == Kernel61 {
		return k, nil
	}
	if k := s.newestCached(cacheDir); k != "" {
		return k, nil
	}
	unlock, err := debpkg.Lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	if k := s.newestCached(cacheDir); k != "" {
		return k, nil // another process fetched it while we waited
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("vm cache: %w", err)
	}
	pkg, err := s.newestPackage()
	if err != nil {
		return "", err
	}
	dl := exec.Command("apt-get", "download", pkg)
	dl.Dir = cacheDir
	if b, err := dl.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download %s: %w\n%s", pkg, err, b)
	}
	debs, _ := filepath.Glob(filepath.Join(cacheDir, pkg+"_*.deb"))
	if len(debs) == 0 {
		return "", fmt.Errorf("apt-get download %s left no .deb in %s", pkg, cacheDir)
	}
	defer func() {
		for _, d := range debs {
			os.Remove(d)
		}
	}()
	return extractKernel(debs[0], cacheDir, s.imageRE)
}

// number is the update number a name of the series carries.
func number(re *regexp.Regexp, name string) int {
	v, _ := strconv.Atoi(re.FindStringSubmatch(name)[1])
	return v
}

func (s *Series) newestCached(cacheDir string) string {
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

func (s *Series) newestPackage() (string, error) {
	search := func() ([]string, error) {
		out, err := exec.Command("apt-cache", "search", "--names-only", s.pkgRE.String()).Output()
		if err != nil {
			return nil, fmt.Errorf("apt-cache search: %w", err)
		}
		var names []string
		for _, line := range strings.Split(string(out), "\n") {
			name, _, _ := strings.Cut(line, " ")
			if s.pkgRE.MatchString(name) {
				names = append(names, name)
			}
		}
		return names, nil
	}
	names, err := search()
	if err == nil && len(names) == 0 && os.Geteuid() == 0 {
		if err = debpkg.Apt("update", "-qq"); err == nil {
			names, err = search()
		}
	}
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no package matching %s in apt (Debian bookworm sources needed)", s.pkgRE)
	}
	return slices.MaxFunc(names, func(a, b string) int { return number(s.pkgRE, a) - number(s.pkgRE, b) }), nil
}

// extractKernel copies ./boot/vmlinuz-* out of a kernel .deb into dir.
func extractKernel(deb, dir string, imageRE *regexp.Regexp) (string, error) {
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
			return "", fmt.Errorf("%s has no /boot/vmlinuz-*", deb)
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", deb, err)
		}
		name := filepath.Base(h.Name)
		if !strings.HasPrefix(strings.TrimPrefix(h.Name, "."), "/boot/") || !imageRE.MatchString(name) {
			continue
		}
		dst := filepath.Join(dir, name)
		tmp := dst + ".tmp"
		f, err := os.Create(tmp)
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
