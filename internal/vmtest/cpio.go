package vmtest

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// File is one entry of an initramfs.
type File struct {
	Name  string      // path inside the archive, without a leading slash
	Mode  fs.FileMode // type and permission bits (fs.ModeDir, fs.ModeCharDevice|fs.ModeDevice, ...)
	Data  []byte      // contents of a regular file
	Major uint32      // device numbers of a device node
	Minor uint32
}

// Linux's S_IF* bits as cpio stores them.
const (
	sIFREG = 0o100000
	sIFDIR = 0o040000
	sIFCHR = 0o020000
)

// WriteCPIO writes files as an uncompressed cpio archive in the "newc"
// format the kernel unpacks as an initramfs (Documentation/driver-api/
// early-userspace/buffer-format.rst). Parent directories must come before
// their entries.
func WriteCPIO(w io.Writer, files []File) error {
	cw := &cpioWriter{w: w}
	for i, f := range files {
		name := strings.TrimPrefix(f.Name, "/")
		if name == "" {
			return fmt.Errorf("cpio: file %d has no name", i)
		}
		mode := uint32(f.Mode.Perm())
		var data []byte
		switch {
		case f.Mode.IsDir():
			mode |= sIFDIR
		case f.Mode&fs.ModeCharDevice != 0:
			mode |= sIFCHR
		case f.Mode.IsRegular():
			mode |= sIFREG
			data = f.Data
		default:
			return fmt.Errorf("cpio: %s: unsupported mode %v", name, f.Mode)
		}
		cw.entry(uint32(i+1), name, mode, f.Major, f.Minor, data)
	}
	cw.entry(0, "TRAILER!!!", 0, 0, 0, nil)
	return cw.err
}

type cpioWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

// pad aligns the stream to 4 bytes, as newc wants after names and data.
func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) entry(ino uint32, name string, mode, rmajor, rminor uint32, data []byte) {
	nlink := uint32(1)
	if mode&sIFDIR != 0 {
		nlink = 2
	}
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize, check
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmajor, rminor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}
