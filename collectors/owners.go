package collectors

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Owner is a process holding a program, directly or through a link.
type Owner struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

// Owners scans <procRoot>/*/fd for fds whose link target is
// anon_inode:bpf-prog or anon_inode:bpf_link, reads the program id from the
// "prog_id:" line of <procRoot>/<pid>/fdinfo/<fd>, and returns owner
// processes by program id, each pid once, sorted by pid. Processes and fds
// that cannot be read are skipped: they come and go.
func Owners(procRoot string) (map[uint32][]Owner, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("owners: %w", err)
	}
	out := make(map[uint32][]Owner)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process (self, sys, ...)
		}
		dir := filepath.Join(procRoot, e.Name())
		ids := procProgIDs(dir)
		if len(ids) == 0 {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil {
			continue
		}
		owner := Owner{PID: pid, Comm: strings.TrimSuffix(string(comm), "\n")}
		for _, id := range ids {
			out[id] = append(out[id], owner)
		}
	}
	for _, owners := range out {
		slices.SortFunc(owners, func(a, b Owner) int { return a.PID - b.PID })
	}
	return out, nil
}

// procProgIDs returns the distinct program ids one process holds.
func procProgIDs(dir string) []uint32 {
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return nil
	}
	var ids []uint32
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err != nil || (target != "anon_inode:bpf-prog" && target != "anon_inode:bpf_link") {
			continue
		}
		id, err := fdinfoUint(filepath.Join(dir, "fdinfo", fd.Name()), "prog_id:")
		if err != nil || id == 0 || slices.Contains(ids, uint32(id)) {
			continue
		}
		ids = append(ids, uint32(id))
	}
	return ids
}
