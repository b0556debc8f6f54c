package cgroupid_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

func writeMountinfo(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMount finds cgroup2 where hybrid and pure hosts mount it, undoes
// mountinfo's escapes, and says so where only v1 is mounted.
func TestMount(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"hybrid": {`25 30 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
41 25 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 25 0:39 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
`, "/sys/fs/cgroup/unified"},
		"pure": {`35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`, "/sys/fs/cgroup"},
		"escaped": {`35 24 0:30 / /mnt/my\040cgroups rw - cgroup2 none rw
`, "/mnt/my cgroups"},
	} {
		got, err := cgroupid.Mount(writeMountinfo(t, tc.text))
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, tc.want)
		}
	}
	_, err := cgroupid.Mount(writeMountinfo(t, "42 25 0:39 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"))
	if !errors.Is(err, cgroupid.ErrNoCgroup2) {
		t.Errorf("v1 only: %v, want cgroupid.ErrNoCgroup2", err)
	}
	if _, err := cgroupid.Mount(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing mountinfo: want an error")
	}
}

// TestPath resolves cgroups made on the host's own cgroup2 mount by their
// inode numbers (what the kernel puts in samples), a cgroup made after a
// walk at once, and a removed one never.
func TestPath(t *testing.T) {
	privtest.Root(t)
	root, err := cgroupid.Mount("/proc/self/mountinfo")
	if err != nil {
		privtest.Skip(t, err.Error())
	}
	base := filepath.Join(root, "bpfperf-cgroupid-test")
	mk := func(rel string) uint64 {
		t.Helper()
		dir := filepath.Join(base, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(dir, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	t.Cleanup(func() {
		os.Remove(filepath.Join(base, "system.slice/later.service"))
		os.Remove(filepath.Join(base, "system.slice/app.service"))
		os.Remove(filepath.Join(base, "system.slice"))
		os.Remove(base)
	})
	app := mk("system.slice/app.service")
	clock := time.Unix(1000, 0)
	r := cgroupid.NewAt(root, func() time.Time { return clock })
	if p, ok := r.Path(app); !ok || p != "/bpfperf-cgroupid-test/system.slice/app.service" {
		t.Fatalf("Path(%d) = %q, %v", app, p, ok)
	}
	if p, ok := r.Path(1); !ok || p != "/" {
		t.Errorf("the root cgroup (id 1): %q, %v", p, ok)
	}
	if err := r.Err(); err != nil {
		t.Error(err)
	}
	// Made after the walk, before another may run: named through its
	// file handle (TestPathOfNewCgroup).
	later := mk("system.slice/later.service")
	if p, ok := r.Path(later); !ok || p != "/bpfperf-cgroupid-test/system.slice/later.service" {
		t.Errorf("a cgroup made after the walk: %q, %v", p, ok)
	}
	if err := os.Remove(filepath.Join(base, "system.slice/app.service")); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(cgroupid.MinRewalk)
	r.Path(1 << 62) // an id no cgroup has: walks again
	if p, ok := r.Path(app); ok {
		t.Errorf("a removed cgroup still resolves to %q", p)
	}
}
