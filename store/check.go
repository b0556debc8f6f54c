package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// maxProblems bounds what Check reports; a badly broken file would
// otherwise list every page.
const maxProblems = 100

// checkPages runs bbolt's page checks in a read-only transaction. They
// are cheap there but not sound while the daemon commits: bbolt's free
// list then holds pages a later commit freed that this snapshot still
// uses, which it reports as "reachable freed" (seen once in six checks of
// a live store). So what a first walk finds is walked again with writers
// held off (writeMu, safe.go), and only that second walk is reported.
// (A writable transaction would hold them off too, but rolling it back
// walks every page again, and on damage bbolt's rollback panics half way,
// keeping its writer lock.)
func (db *DB) checkPages() ([]string, error) {
	walk := func(tx *bolt.Tx) []string {
		var problems []string
		for err := range tx.Check() {
			if len(problems) < maxProblems {
				problems = append(problems, bboltProblem(err))
			}
		}
		return problems
	}
	var first, second []string
	if err := db.view(func(tx *bolt.Tx) error { first = walk(tx); return nil }); err != nil || len(first) == 0 || db.bolt.IsReadOnly() {
		return first, err
	}
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	err := db.view(func(tx *bolt.Tx) error { second = walk(tx); return nil })
	return second, err
}

// bboltProblem words one of bbolt's check findings for a user: the page
// it names, without the panic, wrapper or runtime text it may come in.
func bboltProblem(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "panic: ")
	if inner, ok := strings.CutPrefix(msg, "freepages: failed to get all reachable pages ("); ok {
		msg = strings.TrimSuffix(inner, ")")
	}
	msg = stackInCheck.ReplaceAllString(msg, "(reached through pages $1)")
	if strings.Contains(msg, "runtime error") {
		if m := pageInPanic.FindStringSubmatch(msg); m != nil {
			return fmt.Sprintf("page %s is damaged: reading it fails", m[1])
		}
		return "a page is damaged: reading the page tree fails"
	}
	return msg
}

var stackInCheck = regexp.MustCompile(`\(stack: \[([0-9 ]*)\]\)`)

// Check reads the whole store and returns what is wrong with it: bbolt's
// own page checks, then every record and chunk decoded and cross-checked.
// An empty result means the store is consistent.
func (db *DB) Check() ([]string, error) {
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < maxProblems {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	pageProblems, err := db.checkPages()
	if err != nil {
		return nil, err
	}
	for _, p := range pageProblems {
		report("%s", p)
	}
	err = db.view(func(tx *bolt.Tx) error {
		// A store of an older schema lacks the buckets its migration adds.
		version := uint32(0)
		if meta := tx.Bucket(bucketMeta); meta == nil {
			if tx.Bucket(bucketPrograms) != nil {
				report("bucket meta is missing")
			}
		} else if v := meta.Get(keySchema); len(v) != 4 {
			report("schema version is missing")
		} else {
			version = min(binary.BigEndian.Uint32(v), SchemaVersion)
		}
		for _, b := range slices.Concat(schemaBuckets[:version+1]...) {
			if tx.Bucket(b) == nil {
				report("bucket %s is missing", b)
			}
		}
		if len(problems) > 0 || version == 0 {
			return nil // the rest would only add noise, or there is no rest
		}
		forEach := func(name []byte, fn func(k, v []byte) error) {
			if b := tx.Bucket(name); b != nil {
				b.ForEach(fn)
			}
		}
		programs := map[string]bool{}
		forEach(bucketPrograms, func(k, v []byte) error {
			var p Program
			switch {
			case len(k) != 8:
				report("program key %x: length %d, want 8", k, len(k))
			case json.Unmarshal(v, &p) != nil:
				report("program %d (boot %d): record is not valid JSON", instanceKeyFrom(k).ID, instanceKeyFrom(k).Boot)
			case p.ID != instanceKeyFrom(k).ID:
				report("program key %x holds program id %d", k, p.ID)
			default:
				programs[string(k)] = true
			}
			return nil
		})
		// Sealed chunks of a series must not overlap in time, and the open
		// chunk must come after them.
		lastEnd := map[string]int64{}
		checkChunk := func(series []byte, start int64, v []byte, what string) {
			if len(series) != 9 || series[8] > groupLatency {
				report("%s key %x: not a series key", what, series)
				return
			}
			if !programs[string(series[:8])] {
				report("%s of program %d (boot %d): no program record", what, instanceKeyFrom(series).ID, instanceKeyFrom(series).Boot)
			}
			ch, last, err := decodeSealed(v, nil)
			if err != nil {
				report("%s of program %d (boot %d) at %d: %v", what, instanceKeyFrom(series).ID, instanceKeyFrom(series).Boot, start, err)
				return
			}
			if start >= 0 && ch.t0 != start {
				report("%s of program %d: key says it starts at %d, data at %d", what, instanceKeyFrom(series).ID, start, ch.t0)
			}
			if end, ok := lastEnd[string(series)]; ok && ch.t0 <= end {
				report("%s of program %d: starts at %d, before the previous chunk ends at %d", what, instanceKeyFrom(series).ID, ch.t0, end)
			}
			lastEnd[string(series)] = last.lastT
		}
		forEach(bucketChunks, func(k, v []byte) error {
			if len(k) != 17 {
				report("chunk key %x: length %d, want 17", k, len(k))
				return nil
			}
			checkChunk(k[:9], int64(binary.BigEndian.Uint64(k[9:])), v, "chunk")
			return nil
		})
		forEach(bucketHead, func(k, v []byte) error {
			checkChunk(k, -1, v, "open chunk")
			return nil
		})
		forEach(bucketProfiles, func(k, v []byte) error {
			if _, _, err := decodeProfile(k, v); err != nil {
				report("profile %x: %v", k, err)
			}
			return nil
		})
		forEach(bucketBench, func(k, v []byte) error {
			if _, err := decodeBenchRun(k, v); err != nil {
				report("bench run %x: %v", k, err)
			}
			return nil
		})
		forEach(bucketEvents, func(k, v []byte) error {
			var e Event
			if len(k) != 16 || json.Unmarshal(v, &e) != nil {
				report("event %x is not valid", k)
			}
			return nil
		})
		return nil
	})
	if err == nil && len(problems) > 0 {
		db.noteDamage(fmt.Errorf("%w: %s", ErrCorrupt, problems[0]))
	}
	return problems, err
}
