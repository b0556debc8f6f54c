package vmtest

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// prebuiltDir is where Commands puts binaries inside the VM.
const prebuiltDir = "prebuilt"

// goShim stands in for the go command inside the VM, which has no Go
// toolchain: `go build [flags] -o OUT PKG` copies the binary Commands
// prebuilt for PKG (matched by the last element of its path) to OUT.
// Anything else fails with a message.
const goShim = `#!/bin/sh
if [ "$1" != build ]; then echo "go: only 'go build -o OUT PKG' of a prebuilt command works in the test VM" >&2; exit 2; fi
shift
out= pkg=
while [ $# -gt 0 ]; do
	case "$1" in
	-o) out=$2; shift 2 ;;
	-*) shift ;;
	*) pkg=$1; shift ;;
	esac
done
src=/` + prebuiltDir + `/$(basename "$pkg")
if [ -z "$out" ] || [ ! -f "$src" ]; then echo "go: $pkg was not prebuilt for the test VM (vmtest.Commands)" >&2; exit 1; fi
cp "$src" "$out" && chmod 755 "$out"
`

// Commands builds the main packages in pkgDirs (paths relative to the
// current directory, e.g. "../cmd/bpfperfd") as static binaries for arch
// (CGO_ENABLED=0 GOARCH=arch) in dir, and returns them as initramfs files, with a
// /bin/go shim: a TestMain that builds the commands it tests with
// `go build -o OUT PKG` runs unchanged in the VM and gets these binaries.
func Commands(dir string, arch Arch, pkgDirs ...string) ([]File, error) {
	files := []File{
		{Name: prebuiltDir, Mode: fs.ModeDir | 0o755},
		{Name: "bin/go", Mode: 0o755, Data: []byte(goShim)},
	}
	seen := map[string]string{}
	for _, pkg := range pkgDirs {
		name := filepath.Base(pkg)
		if other, ok := seen[name]; ok {
			return nil, fmt.Errorf("vm commands %s and %s share the name %s", other, pkg, name)
		}
		seen[name] = pkg
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, ".")
		cmd.Dir = pkg
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+string(arch))
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s for the VM: %w\n%s", pkg, err, b)
		}
		if err := checkBinary(out, arch); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: prebuiltDir + "/" + name, Mode: 0o755, Data: b})
	}
	return files, nil
}

// RunTestsWithCommands is RunTests for end-to-end tests: the main packages
// in pkgDirs go along, prebuilt (see Commands). It skips, like RunTests,
// before building anything.
func RunTestsWithCommands(tb testing.TB, cfg Config, pkgDirs, tests []string, args ...string) *Result {
	tb.Helper()
	skipUnlessHost(tb)
	files, err := Commands(tb.TempDir(), cfg.arch(), pkgDirs...)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Files = append(cfg.Files, files...)
	return RunTests(tb, cfg, tests, args...)
}
