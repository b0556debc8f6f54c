package store

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's meta page, as it lays it out on disk (internal/common/meta.go):
// a 16-byte page header, then magic, version, page size, flags (4 bytes
// each), the root bucket (16), the freelist page (8), the page high-water
// mark (8), the transaction id (8) and an FNV-64a checksum of all that.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	metaOffset      = 16
	metaChecksumEnd = 56
)

type boltMeta struct {
	pageSize uint32
	pgid     uint64
	txid     uint64
}

func parseMeta(page []byte) (boltMeta, bool) {
	if len(page) < metaOffset+metaChecksumEnd+8 {
		return boltMeta{}, false
	}
	m := page[metaOffset:]
	le := binary.LittleEndian
	if le.Uint32(m) != boltMagic || le.Uint32(m[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(m[:metaChecksumEnd])
	if h.Sum64() != le.Uint64(m[metaChecksumEnd:]) {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
}

// precheck refuses a file shorter than the pages its newest valid meta page
// claims, before bbolt opens it: bbolt rebuilds its free list by reading
// every page in a goroutine of its own, and a missing page there is a fatal
// fault no recover can catch.
func precheck(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt creates it or says why not
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil
	}
	first := make([]byte, 4096)
	n, _ := io.ReadFull(f, first)
	best, ok := parseMeta(first[:n])
	size := int64(4096)
	if ok {
		size = int64(best.pageSize)
	}
	second := make([]byte, 4096)
	if n, _ := f.ReadAt(second, size); n > 0 {
		if m, ok2 := parseMeta(second[:n]); ok2 && (!ok || m.txid > best.txid) {
			best, ok = m, true
		}
	}
	if !ok {
		return nil // no valid meta page: bbolt reports it as invalid
	}
	if need := int64(best.pgid) * int64(best.pageSize); fi.Size() < need {
		return fmt.Errorf("%w: file is truncated: %d bytes, its pages need %d", ErrCorrupt, fi.Size(), need)
	}
	return nil
}
