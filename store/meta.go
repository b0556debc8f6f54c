package store

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
)

// bbolt's meta page, as it lays it out on disk (internal/common/meta.go):
// a 16-byte page header (id, flags, count, overflow), then magic, version,
// page size, flags (4 bytes each), the root bucket (16), the freelist page
// (8), the page high-water mark (8), the transaction id (8) and an FNV-64a
// checksum of all that. The header is not under the checksum.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	metaOffset      = 16
	metaChecksumEnd = 56
	metaPageFlag    = 0x04
	// noFreelist is the freelist page id of a store that does not write
	// its free list (NoFreelistSync).
	noFreelist = ^uint64(0)
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// parseMeta decodes meta page n, or says in the project's words what is
// wrong with it.
func parseMeta(page []byte, n int) (boltMeta, string) {
	if len(page) < metaOffset+metaChecksumEnd+8 {
		return boltMeta{}, "is missing (file too short)"
	}
	le := binary.LittleEndian
	m := page[metaOffset:]
	if le.Uint32(m) != boltMagic {
		return boltMeta{}, "is not a bbolt meta page (wrong magic number)"
	}
	if le.Uint32(m[4:]) != boltVersion {
		return boltMeta{}, fmt.Sprintf("has bbolt format version %d, want %d", le.Uint32(m[4:]), boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:metaChecksumEnd])
	if h.Sum64() != le.Uint64(m[metaChecksumEnd:]) {
		return boltMeta{}, "fails its checksum"
	}
	meta := boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
	// The header is outside the checksum: bbolt writes it with the page's
	// own id, the meta flag and nothing else.
	if id, flags, count, overflow := le.Uint64(page), le.Uint16(page[8:]), le.Uint16(page[10:]), le.Uint32(page[12:]); id != uint64(n) || flags != metaPageFlag || count != 0 || overflow != 0 {
		return meta, fmt.Sprintf("has a damaged page header (id %d, flags %#x, count %d, overflow %d)", id, flags, count, overflow)
	}
	switch {
	case meta.pageSize < 512 || meta.pageSize > 1<<16 || meta.pageSize&(meta.pageSize-1) != 0:
		return meta, fmt.Sprintf("claims a page size of %d", meta.pageSize)
	case meta.pgid < 3 || meta.root < 2 || meta.root >= meta.pgid:
		return meta, fmt.Sprintf("points its root at page %d of %d", meta.root, meta.pgid)
	case meta.freelist != noFreelist && (meta.freelist < 2 || meta.freelist >= meta.pgid):
		return meta, fmt.Sprintf("points its free list at page %d of %d", meta.freelist, meta.pgid)
	case meta.txid%2 != uint64(n):
		return meta, fmt.Sprintf("holds transaction %d, which belongs on the other meta page", meta.txid)
	}
	return meta, ""
}

// metaReport is what both meta pages say.
type metaReport struct {
	newest   boltMeta
	readable bool     // at least one meta page is sound: the file is a bbolt store
	problems []string // one per damaged meta page, or the file's size
}

// checkMetas reads both meta pages with plain reads (no mmap, nothing a
// damaged byte can fault or loop on) and reports every one that is not
// sound. bbolt alone would silently fall back to the older meta page when
// the newer is damaged, losing the newest commit, and the next commit
// would overwrite pages of it: here that is damage to report, not to
// paper over.
func checkMetas(f *os.File, size int64) metaReport {
	var r metaReport
	first := make([]byte, 4096)
	n, _ := f.ReadAt(first, 0)
	m0, why0 := parseMeta(first[:n], 0)
	// Page 1 sits one page in: the page size comes from page 0 if that is
	// sound, else from the sizes bbolt may have used.
	offsets := []int64{int64(os.Getpagesize()), 4096, 512, 1024, 2048, 8192, 16384, 32768, 65536}
	if why0 == "" {
		offsets = []int64{int64(m0.pageSize)}
	}
	m1, why1 := boltMeta{}, "is missing (file too short)"
	for _, off := range offsets {
		second := make([]byte, 4096)
		n, _ := f.ReadAt(second, off)
		if m, why := parseMeta(second[:n], 1); why == "" || off == offsets[0] {
			m1, why1 = m, why
			if why == "" {
				break
			}
		}
	}
	for i, why := range []string{why0, why1} {
		if why != "" {
			r.problems = append(r.problems, fmt.Sprintf("meta page %d %s", i, why))
		}
	}
	switch {
	case why0 == "" && why1 == "":
		r.newest, r.readable = m0, true
		if m1.txid > m0.txid {
			r.newest = m1
		}
		if m0.pageSize != m1.pageSize {
			r.problems = append(r.problems, fmt.Sprintf("meta pages disagree on the page size (%d and %d)", m0.pageSize, m1.pageSize))
		}
	case why0 == "":
		r.newest, r.readable = m0, true
	case why1 == "":
		r.newest, r.readable = m1, true
	}
	if r.readable {
		if need := int64(r.newest.pgid) * int64(r.newest.pageSize); size < need {
			r.problems = append(r.problems, fmt.Sprintf("file is truncated: %d bytes, its pages need %d", size, need))
		}
	}
	return r
}
