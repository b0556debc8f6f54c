package collectors

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxPins bounds one scan of bpffs: each pin costs an open, an fdinfo
// read and a close.
const maxPins = 10_000

// Pins are the pin paths under a bpffs mount by the program and map ids
// they pin (a pinned link counts for its program), the first path in walk
// order for an object pinned twice.
type Pins struct {
	Progs map[uint32]string
	Maps  map[uint32]string
}

// objGetAttr is the bpf_attr layout of BPF_OBJ_GET.
type objGetAttr struct {
	pathname  unsafe.Pointer
	bpfFd     uint32
	fileFlags uint32
}

// ScanPins walks root (a bpffs mount, usually /sys/fs/bpf) and opens each
// pinned object in turn to read what it pins, closing it at once. A root
// that does not exist or cannot be read has no pins; objects that cannot
// be opened are skipped. At most maxPins are read.
func ScanPins(root string) Pins {
	p := Pins{Progs: map[uint32]string{}, Maps: map[uint32]string{}}
	n := 0
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if n++; n > maxPins {
			return filepath.SkipAll
		}
		name, err := unix.BytePtrFromString(path)
		if err != nil {
			return nil
		}
		attr := objGetAttr{pathname: unsafe.Pointer(name), fileFlags: unix.BPF_F_RDONLY}
		fd, err := bpf(unix.BPF_OBJ_GET, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
		if errors.Is(err, unix.EINVAL) {
			// A pinned link opens read-write only; its fdinfo names
			// the program it attaches, which the pin keeps loaded.
			attr.fileFlags = 0
			fd, err = bpf(unix.BPF_OBJ_GET, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
		}
		if err != nil {
			return nil
		}
		defer unix.Close(int(fd))
		info := "/proc/self/fdinfo/" + strconv.Itoa(int(fd))
		if id, err := fdinfoUint(info, "map_id:"); err == nil && id != 0 {
			if _, ok := p.Maps[uint32(id)]; !ok {
				p.Maps[uint32(id)] = path
			}
		} else if id, err := fdinfoUint(info, "prog_id:"); err == nil && id != 0 {
			if _, ok := p.Progs[uint32(id)]; !ok {
				p.Progs[uint32(id)] = path
			}
		}
		return nil
	})
	return p
}
