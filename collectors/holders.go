package collectors

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/bpfperf/bpfperf/internal/cgroupid"
)

// Holders is who holds what, from one walk of /proc: owner processes by
// program id and by map id.
type Holders struct {
	Progs map[uint32][]Owner
	Maps  map[uint32][]Owner
}

// ScanHolders walks <procRoot>/*/fd once for BPF program, link and map
// fds (the fdinfo's prog_id: and map_id: lines name what they hold) and
// returns each holder once per object, sorted by pid, with its cgroup,
// unit and container. Processes and fds that cannot be read are skipped:
// they come and go.
func ScanHolders(procRoot string) (Holders, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return Holders{Progs: map[uint32][]Owner{}, Maps: map[uint32][]Owner{}}, fmt.Errorf("owners: %w", err)
	}
	held := map[int]*heldIDs{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process (self, sys, ...)
		}
		progs, maps := procBPFIDs(filepath.Join(procRoot, e.Name()))
		if len(progs) > 0 || len(maps) > 0 {
			held[pid] = &heldIDs{progs: progs, maps: maps}
		}
	}
	return holdersOf(procRoot, held), nil
}

// heldIDs is what one process holds: distinct program ids (of its
// program and link fds) and map ids.
type heldIDs struct{ progs, maps []uint32 }

// distinct sorts ids and drops repeats (a process may hold one object
// through many fds): sorting once beats a search per fd for a process
// holding thousands.
func distinct(ids []uint32) []uint32 {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// holdersOf turns what each process holds into Holders, reading each
// holder's comm and cgroup from procRoot. A process gone meanwhile is
// left out.
func holdersOf(procRoot string, held map[int]*heldIDs) Holders {
	h := Holders{Progs: map[uint32][]Owner{}, Maps: map[uint32][]Owner{}}
	for pid, ids := range held {
		dir := filepath.Join(procRoot, strconv.Itoa(pid))
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil {
			continue
		}
		owner := Owner{PID: pid, Comm: strings.TrimSuffix(string(comm), "\n")}
		if cg, err := os.ReadFile(filepath.Join(dir, "cgroup")); err == nil {
			owner.Cgroup = CgroupPath(string(cg))
			owner.Unit, owner.Container = UnitAndContainer(owner.Cgroup)
		}
		for _, id := range distinct(ids.progs) {
			h.Progs[id] = append(h.Progs[id], owner)
		}
		for _, id := range distinct(ids.maps) {
			h.Maps[id] = append(h.Maps[id], owner)
		}
	}
	for _, byID := range []map[uint32][]Owner{h.Progs, h.Maps} {
		for _, owners := range byID {
			slices.SortFunc(owners, func(a, b Owner) int { return a.PID - b.PID })
		}
	}
	return h
}

// procBPFIDs returns the program and map ids one process holds, an id
// once per fd that holds it.
func procBPFIDs(dir string) (progs, maps []uint32) {
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return nil, nil
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err != nil {
			continue
		}
		key, ids := "", &progs
		switch target {
		case "anon_inode:bpf-prog", "anon_inode:bpf_link":
			key = "prog_id:"
		case "anon_inode:bpf-map":
			key, ids = "map_id:", &maps
		default:
			continue
		}
		id, err := fdinfoUint(filepath.Join(dir, "fdinfo", fd.Name()), key)
		if err != nil || id == 0 {
			continue
		}
		*ids = append(*ids, uint32(id))
	}
	return progs, maps
}

// CgroupPath picks the cgroup v2 path ("0::/path") from a
// /proc/<pid>/cgroup this process read, as the host's cgroup namespace
// names it (cgroupid.HostPath), else the first hierarchy's path.
func CgroupPath(s string) string {
	first := ""
	for line := range strings.Lines(s) {
		line = strings.TrimSuffix(line, "\n")
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return cgroupid.HostPath(p)
		}
		if _, rest, ok := strings.Cut(line, ":"); ok && first == "" {
			if _, p, ok := strings.Cut(rest, ":"); ok {
				first = p
			}
		}
	}
	return first
}

// containerID finds a 64-hex container id in a cgroup path component, as
// docker (docker-<id>.scope, /docker/<id>), containerd and CRI-O
// (cri-containerd-<id>.scope, crio-<id>.scope) and podman (libpod-<id>.scope)
// name them.
var containerID = regexp.MustCompile(`(?:^|[-/])([0-9a-f]{64})(?:\.scope)?$`)

// podUID finds a Kubernetes pod uid in a kubepods slice component
// (kubepods-burstable-pod<uid>.slice, with _ for -, or /kubepods/.../pod<uid>).
var podUID = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)

// UnitAndContainer reads a cgroup path: the systemd unit (the innermost
// .service, else .scope, component) and the container it names ("pod
// <uid>/<12 chars of the id>" under Kubernetes, the short id under a plain
// runtime), each empty where the path names none.
func UnitAndContainer(cgroup string) (unit, container string) {
	parts := strings.Split(strings.Trim(cgroup, "/"), "/")
	for i := len(parts) - 1; i >= 0 && unit == ""; i-- {
		if strings.HasSuffix(parts[i], ".service") {
			unit = parts[i]
		}
	}
	for i := len(parts) - 1; i >= 0 && unit == ""; i-- {
		if strings.HasSuffix(parts[i], ".scope") {
			unit = parts[i]
		}
	}
	short := ""
	for i := len(parts) - 1; i >= 0 && short == ""; i-- {
		if m := containerID.FindStringSubmatch(parts[i]); m != nil {
			short = m[1][:12]
		}
	}
	if m := podUID.FindStringSubmatch(cgroup); m != nil {
		pod := "pod " + strings.ReplaceAll(m[1], "_", "-")
		if short != "" {
			return unit, pod + "/" + short
		}
		return unit, pod
	}
	return unit, short
}
