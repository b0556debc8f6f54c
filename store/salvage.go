package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SalvageReport says what Salvage kept and lost, per bucket and for the
// programs whose records were on lost pages.
type SalvageReport struct {
	// Meta is set when a meta page was damaged and the other was used.
	Meta    string
	Buckets []BucketSalvage
	// Lost names each lost page: its bucket, why, and the programs and
	// times its neighbours' keys bound it to.
	Lost []string
}

// BucketSalvage counts one bucket's records.
type BucketSalvage struct {
	Name string
	Kept int
	// Dropped records were read but do not decode, or belong to a
	// program whose record was lost.
	Dropped   int
	LostPages int
}

// Salvage copies every readable record of the store at from into a new
// store at to, which must not exist. It reads from with plain reads, never
// bbolt's mmap, checks every page before following it and skips the pages
// that are damaged, so no page can crash or hang it; from is not written.
func Salvage(from, to string) (SalvageReport, error) {
	var rep SalvageReport
	if _, err := os.Stat(to); err == nil {
		return rep, fmt.Errorf("%s exists: salvage writes a new store", to)
	}
	f, err := os.Open(from)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rep, err
	}
	metas := checkMetas(f, fi.Size())
	if !metas.readable {
		return rep, &DamageError{Path: from, Unreadable: true, Problems: append([]string{"no sound meta page: nothing can be salvaged"}, metas.problems...)}
	}
	if len(metas.problems) > 0 {
		rep.Meta = fmt.Sprintf("%s; read as of transaction %d", metas.problems[0], metas.newest.txid)
	}
	r := &rawReader{f: f, pageSize: int64(metas.newest.pageSize), pgid: metas.newest.pgid, seen: map[uint64]bool{}}
	buckets, lost := r.buckets(metas.newest.root)
	for _, l := range lost {
		rep.Lost = append(rep.Lost, fmt.Sprintf("bucket list: page %d %s", l.page, l.why))
	}
	db, err := Open(to, Options{})
	if err != nil {
		return rep, err
	}
	defer db.Close()
	s := &salvager{db: db, programs: map[string]string{}}
	for _, name := range slices.Concat(schemaBuckets...) {
		i := slices.IndexFunc(buckets, func(b rawBucket) bool { return b.name == string(name) })
		if i < 0 {
			rep.Buckets = append(rep.Buckets, BucketSalvage{Name: string(name)})
			rep.Lost = append(rep.Lost, fmt.Sprintf("bucket %s: not found", name))
			continue
		}
		b, err := s.copyBucket(r, buckets[i], &rep)
		if err != nil {
			return rep, fmt.Errorf("write %s: %w", to, err)
		}
		rep.Buckets = append(rep.Buckets, b)
	}
	return rep, nil
}

type salvager struct {
	db *DB
	// programs maps each kept program key to its name.
	programs map[string]string
}

func (s *salvager) copyBucket(r *rawReader, b rawBucket, rep *SalvageReport) (BucketSalvage, error) {
	out := BucketSalvage{Name: b.name}
	var batch []rawRecord
	flush := func() error {
		err := s.db.update(func(tx *bolt.Tx) error {
			bk := tx.Bucket([]byte(b.name))
			bk.FillPercent = 1.0 // keys come in order
			for _, rec := range batch {
				if err := bk.Put(rec.key, rec.value); err != nil {
					return err
				}
			}
			return bk.SetSequence(max(bk.Sequence(), b.sequence))
		})
		batch = batch[:0]
		return err
	}
	var werr error
	lost := r.walk(b.root, b.inline, func(rec rawRecord) {
		if b.name == string(bucketMeta) && string(rec.key) == string(keySchema) {
			return // the new store has its own
		}
		if !s.valid(b.name, rec) {
			out.Dropped++
			return
		}
		out.Kept++
		batch = append(batch, rawRecord{slices.Clone(rec.key), slices.Clone(rec.value)})
		if len(batch) == 4096 && werr == nil {
			werr = flush()
		}
	})
	if werr == nil {
		werr = flush()
	}
	out.LostPages = len(lost)
	for _, l := range lost {
		rep.Lost = append(rep.Lost, fmt.Sprintf("%s: page %d %s%s", b.name, l.page, l.why, s.bounds(b.name, l)))
	}
	return out, werr
}

// valid decodes a record as Check does; a chunk must also have its
// program, or the new store would not pass check.
func (s *salvager) valid(bucket string, rec rawRecord) bool {
	k, v := rec.key, rec.value
	switch bucket {
	case string(bucketPrograms):
		var p Program
		if len(k) != 8 || json.Unmarshal(v, &p) != nil || p.ID != instanceKeyFrom(k).ID {
			return false
		}
		s.programs[string(k)] = p.Name
		return true
	case string(bucketHead):
		_, err := decodeChunk(v, nil)
		return len(k) == 9 && s.programs[string(k[:8])] != "" && err == nil
	case string(bucketChunks):
		ch, _, err := decodeSealed(v, nil)
		return len(k) == 17 && s.programs[string(k[:8])] != "" && err == nil && ch.t0 == int64(binary.BigEndian.Uint64(k[9:]))
	case string(bucketEvents):
		var e Event
		return len(k) == 16 && json.Unmarshal(v, &e) == nil
	case string(bucketProfiles):
		_, _, err := decodeProfile(k, v)
		return err == nil
	case string(bucketBench):
		_, err := decodeBenchRun(k, v)
		return err == nil
	}
	return true
}

// bounds says what a lost page of a series bucket held, from the keys its
// parent gives either side of it.
func (s *salvager) bounds(bucket string, l lostPage) string {
	describe := func(k []byte) string {
		switch {
		case len(k) >= 8 && (bucket == string(bucketPrograms) || bucket == string(bucketHead) || bucket == string(bucketChunks)):
			key := instanceKeyFrom(k)
			d := fmt.Sprintf("program %d (boot %d", key.ID, key.Boot)
			if name := s.programs[string(k[:8])]; name != "" {
				d += ", " + name
			}
			d += ")"
			if len(k) == 17 {
				d += " at " + time.UnixMilli(int64(binary.BigEndian.Uint64(k[9:]))).UTC().Format(time.RFC3339)
			}
			return d
		case len(k) == 16 && bucket == string(bucketEvents):
			return time.Unix(0, int64(binary.BigEndian.Uint64(k))).UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("key %x", k)
	}
	switch {
	case l.first != nil && l.next != nil:
		return fmt.Sprintf(": records from %s up to %s", describe(l.first), describe(l.next))
	case l.first != nil:
		return fmt.Sprintf(": records from %s on", describe(l.first))
	}
	return ""
}
