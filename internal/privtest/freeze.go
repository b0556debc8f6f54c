package privtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Freezable is a directory on a file system of its own (a small ext4 on
// a loop device) that a test can freeze, as fsfreeze and the snapshot
// tools of LVM and cloud disks do: every write to it then blocks in the
// kernel until it is thawed, a real stall of whatever writes there.
type Freezable struct {
	Path string
}

// FreezableDir makes and mounts a Freezable, unmounted when the test
// ends. It skips (a failure under BPFPERF_REQUIRE_PRIVILEGED=1) where
// mkfs.ext4 or loop mounts are missing.
func FreezableDir(tb testing.TB) *Freezable {
	tb.Helper()
	dir := tb.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(64 << 20)
		f.Close()
	}
	if err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		Skip(tb, fmt.Sprintf("mkfs.ext4: %v %s", err, out))
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		Skip(tb, fmt.Sprintf("mount a loop device: %v %s", err, out))
	}
	tb.Cleanup(func() {
		// -d frees the loop device should mount not have set autoclear.
		if out, err := exec.Command("umount", "-d", mnt).CombinedOutput(); err != nil {
			tb.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	return &Freezable{Path: mnt}
}

// Freeze freezes the file system (FIFREEZE). The test's end thaws it
// before anything registered earlier (a daemon's stop) runs, so nothing is
// left waiting on it.
func (f *Freezable) Freeze(tb testing.TB) {
	tb.Helper()
	if err := f.ioctl(fiFreeze); err != nil {
		Skip(tb, fmt.Sprintf("freeze %s: %v", f.Path, err))
	}
	tb.Cleanup(func() {
		if err := f.Thaw(); err != nil && !errors.Is(err, unix.EINVAL) {
			tb.Errorf("thaw %s: %v", f.Path, err)
		}
	})
}

// linux/fs.h: _IOWR('X', 119, int) and _IOWR('X', 120, int); x/sys/unix
// does not name them.
const (
	fiFreeze = 0xc0045877
	fiThaw   = 0xc0045878
)

// Thaw thaws it (FITHAW); EINVAL says it was not frozen.
func (f *Freezable) Thaw() error { return f.ioctl(fiThaw) }

func (f *Freezable) ioctl(req uint) error {
	d, err := os.Open(f.Path)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.IoctlSetInt(int(d.Fd()), req, 0)
}
