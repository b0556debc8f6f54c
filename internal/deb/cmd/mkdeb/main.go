// Command mkdeb builds bpfperf's Debian package with nfpm, from binaries
// built beforehand (make deb builds them): bpfperfd and bpfperf in
// /usr/bin, the systemd unit, and the sysusers.d file for the bpfperf
// group. It is its own module, so nfpm's dependencies stay out of the
// daemon's.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
)

// Config is what one package is built from.
type Config struct {
	// Root is the repository's root (the unit and sysusers file are read
	// from it), Bin the folder holding the built bpfperfd and bpfperf.
	Root, Bin string
	// Version is the package's version, as git describe gives it
	// (DebVersion).
	Version string
	// Arch is Debian's name for the architecture (amd64, arm64).
	Arch string
	// Out is the .deb written.
	Out string
	// MTime is every file's time, for reproducible packages.
	MTime time.Time
}

func main() {
	c := Config{MTime: time.Unix(0, 0).UTC()}
	flag.StringVar(&c.Root, "root", ".", "the repository's root")
	flag.StringVar(&c.Bin, "bin", "bin", "folder holding the built bpfperfd and bpfperf")
	flag.StringVar(&c.Version, "version", "0.0.0", "package version")
	flag.StringVar(&c.Arch, "arch", runtime.GOARCH, "Debian architecture")
	flag.StringVar(&c.Out, "o", "", "the .deb to write (default <root>/dist/bpfperf_<version>_<arch>.deb)")
	flag.Parse()
	if c.Out == "" {
		c.Out = filepath.Join(c.Root, "dist", fmt.Sprintf("bpfperf_%s_%s.deb", DebVersion(c.Version), c.Arch))
	}
	if err := Build(c); err != nil {
		fmt.Fprintln(os.Stderr, "mkdeb:", err)
		os.Exit(1)
	}
	fmt.Println(c.Out)
}

// release is how a tagged version starts.
var release = regexp.MustCompile(`^[0-9]+\.`)

// DebVersion makes a git describe output a Debian version that sorts
// after its tag: v1.2.3-4-gabc is 1.2.3+4.gabc, and a bare commit abc is
// 0~gitabc, before any release.
func DebVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	if !release.MatchString(v) {
		v = "0~git" + v
	}
	return strings.ReplaceAll(strings.Replace(v, "-", "+", 1), "-", ".")
}

// Build writes the package.
func Build(c Config) error {
	// The unit names /usr/local/bin (make install's prefix); a package
	// installs to /usr/bin.
	unit, err := os.ReadFile(filepath.Join(c.Root, "systemd", "bpfperfd.service"))
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "mkdeb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	unitFile := filepath.Join(tmp, "bpfperfd.service")
	if err := os.WriteFile(unitFile, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/", "/usr/bin/")), 0o644); err != nil {
		return err
	}

	file := func(src, dst string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: mode, MTime: c.MTime}}
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:          "bpfperf",
		Arch:          c.Arch,
		Platform:      "linux",
		Version:       DebVersion(c.Version),
		VersionSchema: "none",
		Section:       "admin",
		Priority:      "optional",
		Maintainer:    "bpfperf maintainers <bpfperf@users.noreply.github.com>",
		Description: "BPF program performance monitor\n" +
			"bpfperfd samples every loaded BPF program's run-time stats, keeps their\n" +
			"history and profiles; bpfperf shows them.",
		Homepage: "https://github.com/bpfperf/bpfperf",
		MTime:    c.MTime,
		Overridables: nfpm.Overridables{
			Depends: []string{"libc6"}, // cgo: the binaries link glibc dynamically
			Contents: files.Contents{
				file(filepath.Join(c.Bin, "bpfperfd"), "/usr/bin/bpfperfd", 0o755),
				file(filepath.Join(c.Bin, "bpfperf"), "/usr/bin/bpfperf", 0o755),
				file(unitFile, "/usr/lib/systemd/system/bpfperfd.service", 0o644),
				file(filepath.Join(c.Root, "systemd", "bpfperf.sysusers.conf"), "/usr/lib/sysusers.d/bpfperf.conf", 0o644),
			},
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(c.Root, "internal", "deb", "scripts", "postinst"),
				PostRemove:  filepath.Join(c.Root, "internal", "deb", "scripts", "postrm"),
			},
		},
	})
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return fmt.Errorf("package contents: %w", err)
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.Out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(c.Out)
	if err != nil {
		return err
	}
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		os.Remove(c.Out)
		return fmt.Errorf("build %s: %w", c.Out, err)
	}
	return f.Close()
}
