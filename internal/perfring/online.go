package perfring

import (
	"strings"

	"golang.org/x/sys/unix"
)

// OnlineFile reads the kernel's list of online CPUs again and again, for
// a reader that watches for a CPU going online or offline. It keeps one
// fd and reads from offset 0 each time (sysfs makes the list anew for
// each read there): an open, a stat, Go's poller registration and a close
// each second were 5.6% of an idle daemon's CPU (perf record, 1,000 idle
// programs, 2026-11-28).
type OnlineFile struct {
	path string
	fd   int // -1 until opened
	buf  []byte
}

// NewOnlineFile reads the list at path (OnlinePath) when asked; nothing
// is opened yet.
func NewOnlineFile(path string) *OnlineFile { return &OnlineFile{path: path, fd: -1} }

// Text is the list as the kernel writes it, trimmed ("0-3,6").
func (o *OnlineFile) Text() (string, error) {
	if o.fd < 0 {
		fd, err := unix.Open(o.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		o.fd, o.buf = fd, make([]byte, 4096)
	}
	n, err := unix.Pread(o.fd, o.buf, 0)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(o.buf[:n])), nil
}

// CPUs is the list parsed.
func (o *OnlineFile) CPUs() ([]int, error) {
	text, err := o.Text()
	if err != nil {
		return nil, err
	}
	return ParseCPUs(text)
}

// Close lets go of the file; a later read opens it again.
func (o *OnlineFile) Close() {
	if o.fd >= 0 {
		unix.Close(o.fd)
		o.fd = -1
	}
}
