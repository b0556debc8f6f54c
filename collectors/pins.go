package collectors

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxPins bounds one scan of bpffs: each new pin costs an open, an fdinfo
// read and a close.
const maxPins = 10_000

// Pins are the pin paths under a bpffs mount by the program and map ids
// they pin (a pinned link counts for its program), the first path in walk
// order for an object pinned twice.
type Pins struct {
	Progs map[uint32]string
	Maps  map[uint32]string
	// Opened is how many pinned objects the scan opened to read; the
	// rest were known from an earlier scan (PinScanner).
	Opened int
}

// objGetAttr is the bpf_attr layout of BPF_OBJ_GET.
type objGetAttr struct {
	pathname  unsafe.Pointer
	bpfFd     uint32
	fileFlags uint32
}

// PinScanner scans a bpffs mount again and again, opening a pinned object
// only when its pin is new. A pinned map or program is fixed for the life
// of its pin's inode: pinning makes a new inode and unpinning drops it, so
// a path seen before with the same inode number and change time pins the
// same object. A pinned link is read at every scan: BPF_LINK_UPDATE swaps
// its program under the same inode. The daemon scans at every owners
// refresh; a host with thousands of pinned maps (Cilium's) then pays a
// stat per pin, not an open, a read and two closes.
type PinScanner struct {
	root  string
	mu    sync.Mutex // one scan at a time
	known map[string]pinRead
}

// pinRead is what an earlier scan read from one pin.
type pinRead struct {
	ino   uint64
	ctime unix.Timespec
	isMap bool
	link  bool
	id    uint32
}

// NewPinScanner scans root, usually /sys/fs/bpf.
func NewPinScanner(root string) *PinScanner {
	return &PinScanner{root: root, known: map[string]pinRead{}}
}

// ScanPins reads every pin under root once: a PinScanner used once.
func ScanPins(root string) Pins { return NewPinScanner(root).Scan() }

// Scan walks the root (one that does not exist or cannot be read has no
// pins; objects that cannot be opened are skipped; at most maxPins are
// read) and forgets pins that are gone.
func (s *PinScanner) Scan() Pins {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := Pins{Progs: map[uint32]string{}, Maps: map[uint32]string{}}
	seen := make(map[string]bool, len(s.known))
	n := 0
	filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if n++; n > maxPins {
			return filepath.SkipAll
		}
		var st unix.Stat_t
		if unix.Lstat(path, &st) != nil {
			return nil
		}
		pin, ok := s.known[path]
		if !ok || pin.link || pin.ino != st.Ino || pin.ctime != st.Ctim {
			if pin, ok = readPin(path); !ok {
				delete(s.known, path)
				return nil
			}
			p.Opened++
			pin.ino, pin.ctime = st.Ino, st.Ctim
			s.known[path] = pin
		}
		seen[path] = true
		byID := p.Progs
		if pin.isMap {
			byID = p.Maps
		}
		if _, dup := byID[pin.id]; !dup {
			byID[pin.id] = path
		}
		return nil
	})
	for path := range s.known {
		if !seen[path] {
			delete(s.known, path)
		}
	}
	return p
}

// readPin opens a pinned object to read the map or program id it pins,
// and closes it at once.
func readPin(path string) (pinRead, bool) {
	name, err := unix.BytePtrFromString(path)
	if err != nil {
		return pinRead{}, false
	}
	attr := objGetAttr{pathname: unsafe.Pointer(name), fileFlags: unix.BPF_F_RDONLY}
	fd, err := bpf(unix.BPF_OBJ_GET, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if errors.Is(err, unix.EINVAL) {
		// A pinned link opens read-write only; its fdinfo names the
		// program it attaches, which the pin keeps loaded.
		attr.fileFlags = 0
		fd, err = bpf(unix.BPF_OBJ_GET, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	}
	if err != nil {
		return pinRead{}, false
	}
	defer unix.Close(int(fd))
	info, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(int(fd)))
	if err != nil {
		return pinRead{}, false
	}
	var pin pinRead
	for line := range strings.Lines(string(info)) {
		key, v, _ := strings.Cut(line, ":")
		id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		switch {
		case err != nil:
		case key == "map_id":
			pin.isMap, pin.id = true, uint32(id)
		case key == "prog_id" && !pin.isMap:
			pin.id = uint32(id)
		case key == "link_id":
			pin.link = true
		}
	}
	return pin, pin.id != 0
}
