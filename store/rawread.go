package store

import (
	"encoding/binary"
	"fmt"
	"os"
)

// rawReader reads a bbolt file's pages with plain reads and checks every
// offset it follows, for salvage: where bbolt would panic, fault or loop
// on a damaged page, this skips the page and says which it was. It never
// writes.
type rawReader struct {
	f        *os.File
	pageSize int64
	pgid     uint64 // pages in use (meta high-water mark)
	seen     map[uint64]bool
}

const (
	branchPageFlag = 0x01
	leafPageFlag   = 0x02
	bucketLeafFlag = 0x01
	pageHeaderSize = 16
	elementSize    = 16
)

// rawRecord is one key and value of a leaf page.
type rawRecord struct{ key, value []byte }

// lostPage is a page salvage could not read, with the keys that bound
// what it held, where its parent names them (nil: unknown).
type lostPage struct {
	page        uint64
	why         string
	first, next []byte
}

// page reads page id with its overflow pages, checking its header.
func (r *rawReader) page(id uint64) ([]byte, error) {
	if id < 2 || id >= r.pgid {
		return nil, fmt.Errorf("points past the pages in use (%d)", r.pgid)
	}
	if r.seen[id] {
		return nil, fmt.Errorf("is reached twice (a loop in the page tree, or held as another page's overflow)")
	}
	r.seen[id] = true
	head := make([]byte, r.pageSize)
	if _, err := r.f.ReadAt(head, int64(id)*r.pageSize); err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	if got := binary.LittleEndian.Uint64(head); got != id {
		return nil, fmt.Errorf("says it is page %d", got)
	}
	overflow := uint64(binary.LittleEndian.Uint32(head[12:]))
	if overflow == 0 {
		return head, nil
	}
	if id+overflow >= r.pgid {
		return nil, fmt.Errorf("claims %d overflow pages, past the pages in use", overflow)
	}
	// Overflow pages are the page's own: one reached twice, by this page
	// and another, means one of the two headers lies.
	for i := uint64(1); i <= overflow; i++ {
		if r.seen[id+i] {
			return nil, fmt.Errorf("claims %d overflow pages, over page %d, which another page holds", overflow, id+i)
		}
	}
	for i := uint64(1); i <= overflow; i++ {
		r.seen[id+i] = true
	}
	full := make([]byte, int64(overflow+1)*r.pageSize)
	if _, err := r.f.ReadAt(full, int64(id)*r.pageSize); err != nil {
		return nil, fmt.Errorf("cannot be read: %v", err)
	}
	return full, nil
}

// elements checks a branch or leaf page's element table and returns the
// (key, value or child) slices it points at, all within the page.
func elements(p []byte) (flags uint16, keys, values [][]byte, children []uint64, bucketFlags []uint32, err error) {
	le := binary.LittleEndian
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	if flags != branchPageFlag && flags != leafPageFlag {
		return 0, nil, nil, nil, nil, fmt.Errorf("has page type %#x, not a branch or leaf", flags)
	}
	if pageHeaderSize+count*elementSize > len(p) {
		return 0, nil, nil, nil, nil, fmt.Errorf("claims %d elements, more than fit", count)
	}
	for i := range count {
		e := p[pageHeaderSize+i*elementSize:]
		start := pageHeaderSize + i*elementSize
		if flags == branchPageFlag {
			pos, ksize := int(le.Uint32(e)), int(le.Uint32(e[4:]))
			if ksize == 0 || start+pos+ksize > len(p) || start+pos < 0 {
				return 0, nil, nil, nil, nil, fmt.Errorf("element %d points outside the page", i)
			}
			keys = append(keys, p[start+pos:start+pos+ksize])
			children = append(children, le.Uint64(e[8:]))
			continue
		}
		bflags, pos, ksize, vsize := le.Uint32(e), int(le.Uint32(e[4:])), int(le.Uint32(e[8:])), int(le.Uint32(e[12:]))
		if pos < 0 || ksize < 0 || vsize < 0 || start+pos+ksize+vsize > len(p) {
			return 0, nil, nil, nil, nil, fmt.Errorf("element %d points outside the page", i)
		}
		keys = append(keys, p[start+pos:start+pos+ksize])
		values = append(values, p[start+pos+ksize:start+pos+ksize+vsize])
		bucketFlags = append(bucketFlags, bflags)
	}
	for i := 1; i < len(keys); i++ {
		if string(keys[i-1]) >= string(keys[i]) {
			return 0, nil, nil, nil, nil, fmt.Errorf("has its keys out of order at element %d", i)
		}
	}
	return flags, keys, values, children, bucketFlags, nil
}

// walk calls fn for every record under the bucket rooted at page root (0:
// the inline page), in key order, and returns the pages it could not read.
// Records marked as nested buckets are left out (walkAll has them).
func (r *rawReader) walk(root uint64, inline []byte, fn func(rawRecord)) []lostPage {
	return r.walkAll(root, inline, func(rec rawRecord, isBucket bool) {
		if !isBucket {
			fn(rec)
		}
	})
}

// walkAll is walk, with the records marked as nested buckets too.
func (r *rawReader) walkAll(root uint64, inline []byte, fn func(rec rawRecord, isBucket bool)) []lostPage {
	var lost []lostPage
	var visit func(id uint64, p []byte, first, next []byte, depth int)
	visit = func(id uint64, p []byte, first, next []byte, depth int) {
		var err error
		if p == nil {
			if p, err = r.page(id); err != nil {
				lost = append(lost, lostPage{id, err.Error(), first, next})
				return
			}
		}
		if depth > 64 {
			lost = append(lost, lostPage{id, "is deeper than any sound tree", first, next})
			return
		}
		flags, keys, values, children, bflags, err := elements(p)
		if err != nil {
			lost = append(lost, lostPage{id, err.Error(), first, next})
			return
		}
		if flags == branchPageFlag {
			for i, child := range children {
				n := next
				if i+1 < len(keys) {
					n = keys[i+1]
				}
				visit(child, nil, keys[i], n, depth+1)
			}
			return
		}
		for i := range keys {
			fn(rawRecord{keys[i], values[i]}, bflags[i]&bucketLeafFlag != 0)
		}
	}
	visit(root, inline, nil, nil, 0)
	return lost
}

// buckets reads the root bucket: each top-level bucket's root page (or
// inline page) and sequence.
type rawBucket struct {
	name     string
	root     uint64
	sequence uint64
	inline   []byte
}

func (r *rawReader) buckets(root uint64) ([]rawBucket, []lostPage) {
	var out []rawBucket
	lost := r.walkBuckets(root, func(k, v []byte) {
		if len(v) < 16 {
			return
		}
		b := rawBucket{name: string(k), root: binary.LittleEndian.Uint64(v), sequence: binary.LittleEndian.Uint64(v[8:])}
		if b.root == 0 {
			if len(v) < 16+pageHeaderSize {
				return
			}
			b.inline = v[16:]
		}
		out = append(out, b)
	})
	return out, lost
}

// walkBuckets is walk over the root bucket, which holds only bucket
// entries.
func (r *rawReader) walkBuckets(root uint64, fn func(k, v []byte)) []lostPage {
	var lost []lostPage
	var visit func(id uint64, depth int)
	visit = func(id uint64, depth int) {
		p, err := r.page(id)
		if err == nil && depth > 64 {
			err = fmt.Errorf("is deeper than any sound tree")
		}
		var flags uint16
		var keys, values [][]byte
		var children []uint64
		var bflags []uint32
		if err == nil {
			flags, keys, values, children, bflags, err = elements(p)
		}
		if err != nil {
			lost = append(lost, lostPage{page: id, why: err.Error()})
			return
		}
		if flags == branchPageFlag {
			for _, c := range children {
				visit(c, depth+1)
			}
			return
		}
		for i := range keys {
			if bflags[i]&bucketLeafFlag != 0 {
				fn(keys[i], values[i])
			}
		}
	}
	visit(root, 0)
	return lost
}
