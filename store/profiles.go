package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CPU profiles, one record per profile in the profiles bucket:
//
//	key   = start (unix ns, big-endian) ‖ id (big-endian uint64)
//	value = format byte (1) ‖ uvarint header length ‖ JSON header ‖ gzipped pprof
//
// Keys sort by start time, so a time range is one cursor seek. The id is the
// bucket's sequence number at the time of the write: short, never reused
// (bbolt keeps sequences through compaction), and what users type. Reading
// a list decodes headers only.

// Kinds of profiles.
const (
	ProfileContinuous = "continuous" // a window of continuous profiling
	ProfileOnDemand   = "on-demand"  // a capture asked for through the API
)

// ErrNoProfile means no stored profile has the id asked for.
var ErrNoProfile = errors.New("no such profile")

const (
	profileFormat  = 1
	profileKeySize = 16
)

// ProfileInfo describes one stored profile (its header).
type ProfileInfo struct {
	ID       string    `json:"id"`
	Start    time.Time `json:"start"`
	Duration int64     `json:"duration_ns"`
	Kind     string    `json:"kind"`
	Event    string    `json:"event"`
	Hz       int       `json:"hz"`
	// Samples counts the samples in the profile (with a BPF frame, unless
	// the daemon keeps every kernel sample).
	Samples int64 `json:"samples"`
	// Bytes is the size of the stored, gzipped pprof profile.
	Bytes int `json:"bytes"`
}

// End is when the profile's window ended.
func (p ProfileInfo) End() time.Time { return p.Start.Add(time.Duration(p.Duration)) }

// profileHeader is what the record stores besides the pprof bytes.
type profileHeader struct {
	Duration int64  `json:"d"`
	Kind     string `json:"k"`
	Event    string `json:"e"`
	Hz       int    `json:"hz"`
	Samples  int64  `json:"n"`
}

// PutProfile stores a gzipped pprof profile described by info (ID and Bytes
// are ignored) and returns its id.
func (db *DB) PutProfile(info ProfileInfo, data []byte) (string, error) {
	hdr, err := json.Marshal(profileHeader{Duration: info.Duration, Kind: info.Kind, Event: info.Event, Hz: info.Hz, Samples: info.Samples})
	if err != nil {
		return "", err
	}
	v := make([]byte, 0, 1+binary.MaxVarintLen64+len(hdr)+len(data))
	v = append(v, profileFormat)
	v = binary.AppendUvarint(v, uint64(len(hdr)))
	v = append(append(v, hdr...), data...)
	var id uint64
	err = db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProfiles)
		b.FillPercent = 1.0 // profiles are appended in (near) time order
		if id, err = b.NextSequence(); err != nil {
			return err
		}
		return b.Put(profileKey(info.Start, id), v)
	})
	if err != nil {
		return "", fmt.Errorf("store profile: %w", err)
	}
	return strconv.FormatUint(id, 10), nil
}

func profileKey(start time.Time, id uint64) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, profileKeySize), uint64(max(start.UnixNano(), 0)))
	return binary.BigEndian.AppendUint64(k, id)
}

// decodeProfile splits a record into its info and its pprof bytes (which
// alias v: valid only inside the transaction).
func decodeProfile(k, v []byte) (ProfileInfo, []byte, error) {
	if len(k) != profileKeySize {
		return ProfileInfo{}, nil, fmt.Errorf("%w: profile key %x: length %d, want %d", ErrCorrupt, k, len(k), profileKeySize)
	}
	if len(v) < 2 || v[0] != profileFormat {
		return ProfileInfo{}, nil, fmt.Errorf("%w: profile %x: unknown record format", ErrCorrupt, k)
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || n > uint64(len(v)-1-w) {
		return ProfileInfo{}, nil, fmt.Errorf("%w: profile %x: bad header length", ErrCorrupt, k)
	}
	var h profileHeader
	if err := json.Unmarshal(v[1+w:1+w+int(n)], &h); err != nil {
		return ProfileInfo{}, nil, fmt.Errorf("%w: profile %x: header: %v", ErrCorrupt, k, err)
	}
	data := v[1+w+int(n):]
	return ProfileInfo{
		ID:       strconv.FormatUint(binary.BigEndian.Uint64(k[8:]), 10),
		Start:    time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))),
		Duration: h.Duration, Kind: h.Kind, Event: h.Event, Hz: h.Hz, Samples: h.Samples,
		Bytes: len(data),
	}, data, nil
}

// ListProfiles describes the profiles whose window overlaps [from, to],
// oldest first.
func (db *DB) ListProfiles(from, to time.Time) ([]ProfileInfo, error) {
	var out []ProfileInfo
	err := db.profilesIn(from, to, func(info ProfileInfo, _ []byte) error {
		out = append(out, info)
		return nil
	})
	return out, err
}

// EachProfile calls fn with each profile whose window overlaps [from, to],
// oldest first. data is valid only during the call; an error from fn stops
// the walk and is returned.
func (db *DB) EachProfile(from, to time.Time, fn func(info ProfileInfo, data []byte) error) error {
	return db.profilesIn(from, to, fn)
}

// MaxProfileDuration is the longest profile window the store lists
// correctly: a range query seeks this far back before its start for
// windows that overlap it. The daemon refuses longer windows.
const MaxProfileDuration = time.Hour

func (db *DB) profilesIn(from, to time.Time, fn func(ProfileInfo, []byte) error) error {
	return db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketProfiles).Cursor()
		for k, v := c.Seek(profileKey(from.Add(-MaxProfileDuration), 0)); k != nil; k, v = c.Next() {
			info, data, err := decodeProfile(k, v)
			if err != nil {
				return err
			}
			if info.Start.After(to) {
				break
			}
			if info.End().Before(from) {
				continue
			}
			if err := fn(info, data); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetProfile returns a profile's info and its gzipped pprof bytes. An id
// that is not stored fails with ErrNoProfile. Ids are not in the key's
// leading bytes, so this walks the keys, newest first (profiles asked for
// are usually recent): a week of one-minute windows is 10,080 keys.
func (db *DB) GetProfile(id string) (ProfileInfo, []byte, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return ProfileInfo{}, nil, fmt.Errorf("%w %q: profile ids are positive numbers (see `bpfperf profile list`)", ErrNoProfile, id)
	}
	want := binary.BigEndian.AppendUint64(nil, n)
	var info ProfileInfo
	var data []byte
	err = db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketProfiles).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if len(k) != profileKeySize || !bytes.Equal(k[8:], want) {
				continue
			}
			i, d, err := decodeProfile(k, v)
			if err != nil {
				return err
			}
			info, data = i, bytes.Clone(d)
			return nil
		}
		return fmt.Errorf("%w %q (expired, or never stored; see `bpfperf profile list`)", ErrNoProfile, id)
	})
	return info, data, err
}

// ExpireProfiles deletes the profiles that started more than keep before
// now, in small transactions, and returns how many it deleted.
func (db *DB) ExpireProfiles(now time.Time, keep time.Duration) (int, error) {
	cutoff := profileKey(now.Add(-keep), 0)
	var keys [][]byte
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketProfiles).Cursor()
		for k, _ := c.First(); k != nil && len(keys) < expireMax && bytes.Compare(k, cutoff) < 0; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("expire profiles: %w", err)
	}
	n, err := db.deleteInBatches(bucketProfiles, keys, expireBatch)
	if err != nil {
		return n, fmt.Errorf("expire profiles: %w", err)
	}
	return n, nil
}

// ProfileData returns the gzipped pprof bytes of each profile in infos (as
// ListProfiles described them), in the same order, reading them in one
// transaction by key. A profile expired since it was listed fails with
// ErrNoProfile.
func (db *DB) ProfileData(infos []ProfileInfo) ([][]byte, error) {
	out := make([][]byte, 0, len(infos))
	err := db.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketProfiles)
		for _, info := range infos {
			id, err := strconv.ParseUint(info.ID, 10, 64)
			if err != nil {
				return fmt.Errorf("%w %q", ErrNoProfile, info.ID)
			}
			k := profileKey(info.Start, id)
			v := b.Get(k)
			if v == nil {
				return fmt.Errorf("%w %q (expired meanwhile)", ErrNoProfile, info.ID)
			}
			_, data, err := decodeProfile(k, v)
			if err != nil {
				return err
			}
			out = append(out, bytes.Clone(data))
		}
		return nil
	})
	return out, err
}
