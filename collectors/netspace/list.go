package netspace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Namespace is one network namespace of the host and the ways in.
type Namespace struct {
	Inode uint64
	// Name is its name under /run/netns (ip netns, CNI), "" if none.
	Name string
	// PIDs are a few processes in it, lowest first (a pod's sandbox
	// process is usually the lowest); none where only a bind mount
	// keeps it.
	PIDs []int
	// paths refer to it: its bind mounts, then /proc/PID/ns/net.
	paths []string
}

// pidsKept bounds the processes remembered per namespace: enough to find
// one in a pod's cgroup where another (nsenter from the host) came first.
const pidsKept = 4

// netnsDirs are where ip netns (and containerd's CNI setup) bind-mount
// named namespaces.
var netnsDirs = []string{"/run/netns/", "/var/run/netns/"}

// list finds the network namespaces a process here can see, as bpftool
// net does per namespace and lsns does: bind mounts of nsfs (from
// mountinfo: ip netns, CNI, Docker), then every process's ns/net
// (threads that entered another namespace are not looked at). Each
// inode once; what vanishes while it is read is left out.
func list(procRoot string) ([]Namespace, error) {
	byIno := map[uint64]*Namespace{}
	var order []uint64
	add := func(ino uint64) *Namespace {
		ns := byIno[ino]
		if ns == nil {
			ns = &Namespace{Inode: ino}
			byIno[ino] = ns
			order = append(order, ino)
		}
		return ns
	}
	mounts, err := os.ReadFile(filepath.Join(procRoot, "self/mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	for _, m := range nsfsMounts(mounts) {
		ns := add(m.ino)
		ns.paths = append(ns.paths, m.path)
		for _, dir := range netnsDirs {
			if name, ok := strings.CutPrefix(m.path, dir); ok && ns.Name == "" && !strings.Contains(name, "/") {
				ns.Name = name
			}
		}
	}
	dir, err := os.Open(procRoot)
	if err != nil {
		return nil, err
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", procRoot, err)
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil {
			pids = append(pids, pid)
		}
	}
	// Lowest pid first, so a namespace's first process is its oldest one
	// as a rule (the sandbox's pause before the pod's containers).
	slices.Sort(pids)
	for _, pid := range pids {
		path := filepath.Join(procRoot, strconv.Itoa(pid), "ns/net")
		link, err := os.Readlink(path)
		if err != nil {
			continue // gone, or a kernel thread's of another owner
		}
		ino, ok := parseNsLink(link)
		if !ok {
			continue
		}
		ns := add(ino)
		if len(ns.PIDs) < pidsKept {
			ns.PIDs = append(ns.PIDs, pid)
			ns.paths = append(ns.paths, path)
		}
	}
	out := make([]Namespace, 0, len(order))
	for _, ino := range order {
		out = append(out, *byIno[ino])
	}
	return out, nil
}

type nsfsMount struct {
	ino  uint64
	path string
}

// nsfsMounts reads the network namespaces bind-mounted somewhere from
// mountinfo: "47 46 0:4 net:[4026532176] /run/netns/blue rw shared:2 -
// nsfs nsfs rw".
func nsfsMounts(mountinfo []byte) []nsfsMount {
	var out []nsfsMount
	s := bufio.NewScanner(bytes.NewReader(mountinfo))
	for s.Scan() {
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(postFields) < 1 || postFields[0] != "nsfs" {
			continue
		}
		if ino, ok := parseNsLink(fields[3]); ok {
			out = append(out, nsfsMount{ino, unescapeMount(fields[4])})
		}
	}
	return out
}

// parseNsLink reads "net:[4026531840]", what /proc/PID/ns/net links to.
func parseNsLink(s string) (uint64, bool) {
	rest, ok := strings.CutPrefix(s, "net:[")
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, "]")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(rest, 10, 64)
	return ino, err == nil
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline
// and backslash in a path.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// selfInode is the inode of the network namespace this process runs in.
func selfInode(procRoot string) (uint64, error) {
	link, err := os.Readlink(filepath.Join(procRoot, "self/ns/net"))
	if err != nil {
		return 0, fmt.Errorf("own network namespace: %w", err)
	}
	ino, ok := parseNsLink(link)
	if !ok {
		return 0, errors.New("own network namespace: unexpected link " + link)
	}
	return ino, nil
}
