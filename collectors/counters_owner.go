package collectors

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
)

// targetHeld reports whether anything we can see keeps the program with
// the given id loaded: a process fd (Owners), a link (Links) or a pin in a
// bpffs mount. Our own windows never count: they hold the target only
// through tracing links, whose prog_id is the fentry/fexit program's.
//
// References without such evidence (legacy netlink or cgroup attachments,
// prog array slots) are invisible here; a window whose target had none at
// its start is bounded by its duration only.
func targetHeld(procRoot string, id uint32) (bool, error) {
	owners, err := Owners(procRoot)
	if err != nil {
		return false, err
	}
	if len(owners[id]) > 0 {
		return true, nil
	}
	links, err := Links()
	if err != nil {
		return false, err
	}
	if len(links[id]) > 0 {
		return true, nil
	}
	return pinned(procRoot, id), nil
}

// pinned reports whether a program with the given id is pinned in any
// bpffs mount listed in <procRoot>/self/mounts. Each pin is opened, read
// and closed.
func pinned(procRoot string, id uint32) bool {
	f, err := os.Open(filepath.Join(procRoot, "self/mounts"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[2] != "bpf" {
			continue
		}
		found := false
		filepath.WalkDir(fields[1], func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || found {
				return nil
			}
			prog, err := ebpf.LoadPinnedProgram(path, &ebpf.LoadPinOptions{ReadOnly: true})
			if err != nil {
				return nil // a map, a link, or gone
			}
			defer prog.Close()
			if info, err := prog.Info(); err == nil {
				if pid, ok := info.ID(); ok && uint32(pid) == id {
					found = true
					return fs.SkipAll
				}
			}
			return nil
		})
		if found {
			return true
		}
	}
	return false
}
