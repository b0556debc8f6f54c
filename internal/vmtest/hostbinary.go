package vmtest

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// HostBinary returns a dynamically linked program of the host (bpftool,
// say) as initramfs files: the program at bin/<name>, where the VM's PATH
// finds it, and the shared libraries and loader `ldd` names at their own
// paths, with their parent directories. A peer tool then runs in the VM
// as built by the distribution, for side-by-side figures there.
func HostBinary(path string) ([]File, error) {
	out, err := exec.Command("ldd", path).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", path, err)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	files := []File{{Name: "bin/" + filepath.Base(path), Mode: 0o755, Data: bin}}
	dirs := map[string]bool{"bin": true}
	for _, line := range strings.Split(string(out), "\n") {
		// "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)"; the vDSO has no file.
		fields := strings.Fields(line)
		lib := ""
		switch {
		case len(fields) >= 3 && fields[1] == "=>":
			lib = fields[2]
		case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"):
			lib = fields[0]
		}
		if lib == "" {
			continue
		}
		data, err := os.ReadFile(lib) // follows the soname's link
		if err != nil {
			return nil, fmt.Errorf("%s needs %s: %w", path, lib, err)
		}
		name := strings.TrimPrefix(lib, "/")
		// Parents before their entries, as the archive wants.
		var parents []string
		for d := filepath.Dir(name); d != "." && !dirs[d]; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
			dirs[d] = true
		}
		for _, d := range parents {
			files = append(files, File{Name: d, Mode: fs.ModeDir | 0o755})
		}
		files = append(files, File{Name: name, Mode: 0o755, Data: data})
	}
	return files, nil
}
