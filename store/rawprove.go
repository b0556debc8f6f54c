package store

import (
	"fmt"
	"os"
)

// rawProve is rawPageProblems on the file at path, from its newest meta
// page; CheckFile has already refused a file without a sound one.
func rawProve(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return []string{err.Error()}
	}
	metas := checkMetas(f, fi.Size())
	if !metas.readable {
		return metas.problems
	}
	return rawPageProblems(f, metas.newest)
}

// rawPageProblems walks the page tree of the newest meta page with plain
// reads (rawread.go) and returns what it could not read. It checks what
// bbolt's Tx.Check does not: that a page's overflow stays inside the pages
// in use and over no page another holds. bbolt trusts both. A flipped bit
// in an overflow count passes Tx.Check, and the first write that frees
// that page then panics ("page 7 already freed") inside a commit whose
// rollback walks the damaged tree in a goroutine of bbolt's own. The
// schema has no nested buckets, so a record marked as one is damage too.
func rawPageProblems(f *os.File, meta boltMeta) []string {
	r := &rawReader{f: f, pageSize: int64(meta.pageSize), pgid: meta.pgid, seen: map[uint64]bool{}}
	var problems []string
	add := func(where string, l lostPage) {
		if len(problems) < maxProblems {
			problems = append(problems, fmt.Sprintf("%spage %d %s", where, l.page, l.why))
		}
	}
	buckets, lost := r.buckets(meta.root)
	for _, l := range lost {
		add("bucket list: ", l)
	}
	for _, b := range buckets {
		nested := 0
		for _, l := range r.walkAll(b.root, b.inline, func(_ rawRecord, isBucket bool) {
			if isBucket {
				nested++
			}
		}) {
			add("bucket "+b.name+": ", l)
		}
		if nested > 0 && len(problems) < maxProblems {
			problems = append(problems, fmt.Sprintf("bucket %s: %d records are marked as nested buckets, which this schema never writes", b.name, nested))
		}
	}
	return problems
}
