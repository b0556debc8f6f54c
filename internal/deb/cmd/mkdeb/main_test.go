package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// root is the repository's root, from this package's folder.
const root = "../../../.."

// TestBuild builds the package from freshly built binaries and reads it
// back with dpkg-deb: its files and modes, its control fields, and the
// extracted bpfperfd runs. It does not install it.
func TestBuild(t *testing.T) {
	dpkgDeb, err := exec.LookPath("dpkg-deb")
	if err != nil {
		t.Skip("dpkg-deb not installed (Debian's dpkg)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for _, name := range []string{"bpfperfd", "bpfperf"} {
		cmd := exec.Command("go", "build", "-ldflags", "-X main.version=v1.2.3-4-gabcdef0", "-o", filepath.Join(bin, name), "./cmd/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	deb := filepath.Join(dir, "bpfperf.deb")
	if err := Build(Config{Root: root, Bin: bin, Version: "v1.2.3-4-gabcdef0", Arch: "amd64", Out: deb, MTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}

	out := run(t, dpkgDeb, "-c", deb)
	for _, want := range []string{
		"-rwxr-xr-x root/root .* ./usr/bin/bpfperfd",
		"-rwxr-xr-x root/root .* ./usr/bin/bpfperf",
		"-rw-r--r-- root/root .* ./usr/lib/systemd/system/bpfperfd.service",
		"-rw-r--r-- root/root .* ./usr/lib/sysusers.d/bpfperf.conf",
	} {
		mode, path, _ := strings.Cut(want, " .* ")
		if !hasLine(out, mode, path) {
			t.Errorf("dpkg-deb -c: no %s %s in\n%s", mode, path, out)
		}
	}
	info := run(t, dpkgDeb, "-I", deb)
	for _, want := range []string{"Package: bpfperf", "Version: 1.2.3+4.gabcdef0", "Architecture: amd64", "Section: admin", "Depends: libc6", "postinst", "postrm"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb -I: no %q in\n%s", want, info)
		}
	}

	x := filepath.Join(dir, "x")
	run(t, dpkgDeb, "-x", deb, x)
	if v := run(t, filepath.Join(x, "usr/bin/bpfperfd"), "--version"); !strings.Contains(v, "v1.2.3-4-gabcdef0") {
		t.Errorf("bpfperfd --version: %q", v)
	}
	unit, err := os.ReadFile(filepath.Join(x, "usr/lib/systemd/system/bpfperfd.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/bin/bpfperfd ") || strings.Contains(string(unit), "/usr/local") {
		t.Errorf("the packaged unit does not run /usr/bin/bpfperfd:\n%s", unit)
	}
}

func TestDebVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3": "1.2.3", "1.2.3-4-gabcdef0": "1.2.3+4.gabcdef0", "v1.2.3-4-gabcdef0-dirty": "1.2.3+4.gabcdef0.dirty",
		"860a7e2": "0~git860a7e2", "860a7e2-dirty": "0~git860a7e2+dirty", "": "0~git",
	} {
		if got := DebVersion(in); got != want {
			t.Errorf("DebVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// hasLine says whether a dpkg-deb -c listing has a line starting with
// mode and ending with path.
func hasLine(listing, mode, path string) bool {
	for _, l := range strings.Split(listing, "\n") {
		if strings.HasPrefix(l, mode) && strings.HasSuffix(l, " "+path) {
			return true
		}
	}
	return false
}
