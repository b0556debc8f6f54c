// Package cgroupid turns the cgroup v2 ids that perf samples carry
// (PERF_SAMPLE_CGROUP) into cgroup paths such as
// /system.slice/nginx.service. A cgroup's id is the inode number of its
// directory under the cgroup2 mount, so the resolver walks that mount once
// and walks it again when it meets an id it does not know, at most once
// per MinRewalk: a cgroup made since the last walk resolves at the next,
// and one removed before it never does (Path says so).
//
// The mount is wherever the host has it: /sys/fs/cgroup on a pure
// cgroup2 host, /sys/fs/cgroup/unified beside v1 controllers (hybrid).
package cgroupid

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MinRewalk is the least time between two walks of the mount: samples
// from many cgroups already gone cost a walk a second at most, not one per
// id (a profile asks once per id and window). Longer would hide a cgroup
// made just after a walk for as long: a 10 s floor once left a service
// started 3 s after the daemon unnamed for its first windows.
const MinRewalk = time.Second

// ErrNoCgroup2 is returned where no cgroup2 file system is mounted (a
// v1-only host): samples there carry ids that name nothing.
var ErrNoCgroup2 = errors.New("no cgroup2 file system is mounted")

// Resolver maps cgroup ids to paths under the cgroup2 mount. It is safe
// for concurrent use.
type Resolver struct {
	root string
	now  func() time.Time

	mu       sync.Mutex
	paths    map[uint64]string
	lastWalk time.Time
	walkErr  error
}

// New finds the cgroup2 mount in mountinfo (a /proc/<pid>/mountinfo) and
// returns a resolver for it.
func New(mountinfo string) (*Resolver, error) {
	root, err := Mount(mountinfo)
	if err != nil {
		return nil, err
	}
	return NewAt(root, nil), nil
}

// NewAt returns a resolver for a cgroup2 mount at root, which reads the
// time for MinRewalk from now (time.Now when nil).
func NewAt(root string, now func() time.Time) *Resolver {
	if now == nil {
		now = time.Now
	}
	return &Resolver{root: root, now: now}
}

// Root is the cgroup2 mount the resolver walks.
func (r *Resolver) Root() string { return r.root }

// Mount returns where mountinfo mounts the cgroup2 file system.
func Mount(mountinfo string) (string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", fmt.Errorf("find the cgroup2 mount: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// 41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if fstype, _, _ := strings.Cut(post, " "); fstype != "cgroup2" {
			continue
		}
		if fields := strings.Fields(pre); len(fields) >= 5 {
			return unescape(fields[4]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("find the cgroup2 mount: read %s: %w", mountinfo, err)
	}
	return "", ErrNoCgroup2
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + c - '0'
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Path returns the path of cgroup id relative to the mount ("/" for the
// root cgroup, "/system.slice/ssh.service" below it), and false when no
// cgroup has that id now: it was removed, or (where file handles cannot be
// opened) made since the last walk less than MinRewalk ago.
func (r *Resolver) Path(id uint64) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.paths[id]; ok {
		return p, true
	}
	if p, ok := r.byHandle(id); ok {
		if r.paths == nil {
			r.paths = map[uint64]string{}
		}
		r.paths[id] = p
		return p, true
	}
	if r.paths != nil && r.now().Sub(r.lastWalk) < MinRewalk {
		return "", false
	}
	r.walk()
	p, ok := r.paths[id]
	return p, ok
}

// fileIDKernfs is the file handle type of a kernfs node (a cgroup2
// directory), whose handle is its 64-bit id.
const fileIDKernfs = 0xfe

// byHandle opens cgroup id by its file handle (the id is the handle on
// cgroup2) and reads its path back: one lookup however the hierarchy
// grew since the last walk, which a cgroup made a moment ago (a unit
// that just started its loader) needs. It needs CAP_DAC_READ_SEARCH.
func (r *Resolver) byHandle(id uint64) (string, bool) {
	mount, err := unix.Open(r.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	defer unix.Close(mount)
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], id)
	fd, err := unix.OpenByHandleAt(mount, unix.NewFileHandle(fileIDKernfs, b[:]), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return "", false
	}
	defer unix.Close(fd)
	dir, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(r.root, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", false
	}
	return "/" + strings.TrimPrefix(filepath.ToSlash(rel), "."), true
}

// Err is the last walk's failure, nil when it read the whole mount.
func (r *Resolver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.walkErr
}

// walk maps every cgroup directory's inode number to its path. Cgroups
// removed while it runs are skipped.
func (r *Resolver) walk() {
	paths := make(map[uint64]string, max(len(r.paths), 64))
	r.walkErr = filepath.WalkDir(r.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if path == r.root {
				return err
			}
			return nil // one unreadable cgroup does not hide the others
		}
		if !d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		rel := strings.TrimPrefix(path, r.root)
		if rel == "" {
			rel = "/"
		}
		paths[st.Ino] = rel
		return nil
	})
	if r.walkErr != nil {
		r.walkErr = fmt.Errorf("walk cgroups under %s: %w", r.root, r.walkErr)
	}
	r.paths = paths
	r.lastWalk = r.now()
}

// OfTask is the cgroup v2 id of the task whose /proc cgroup file is
// procFile (/proc/PID/cgroup, or /proc/PID/task/TID/cgroup): the inode
// number of its directory under root, the cgroup2 mount, as the kernel
// gives it (bpf_get_current_cgroup_id, PERF_SAMPLE_CGROUP).
func OfTask(root, procFile string) (uint64, error) {
	if root == "" {
		return 0, ErrNoCgroup2
	}
	path, err := v2Path(procFile)
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(root, HostPath(path)), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
