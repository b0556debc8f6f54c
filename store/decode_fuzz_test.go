package store

import (
	"encoding/binary"
	"errors"
	"testing"
)

// Fuzz targets for the store's record decoders: a damaged record is an
// error (ErrCorrupt or a corrupt chunk), never a panic. `go test` runs the
// seeds; `make fuzz` searches further.

func FuzzDecodeSealed(f *testing.F) {
	c := &chunk{columns: 3}
	_ = c.append(1, []uint64{1, 2, 3})
	_ = c.append(2, []uint64{4, 5, 6})
	f.Add(c.buf)
	f.Add(appendToSegment(appendToSegment(nil, c.buf), c.buf))
	f.Add([]byte{segmentMark, 200, 1})
	f.Fuzz(func(t *testing.T, v []byte) {
		first, last, err := decodeSealed(v, func(int64, []uint64) {})
		if err == nil && (first == nil) != (last == nil) {
			t.Fatalf("first %v, last %v", first, last)
		}
	})
}

func FuzzDecodeProfile(f *testing.F) {
	key := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1700000000e9), 42)
	header := []byte(`{"duration":10000000000,"kind":"continuous","event":"cpu-clock","hz":99,"samples":3}`)
	v := append([]byte{profileFormat}, binary.AppendUvarint(nil, uint64(len(header)))...)
	v = append(append(v, header...), 0x1f, 0x8b)
	f.Add(key, v)
	f.Add(key, []byte{profileFormat, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(key[:3], v)
	f.Fuzz(func(t *testing.T, k, v []byte) {
		info, data, err := decodeProfile(k, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("not ErrCorrupt: %v", err)
			}
			return
		}
		if info.Bytes != len(data) {
			t.Fatalf("info says %d bytes, data has %d", info.Bytes, len(data))
		}
	})
}

func FuzzDecodeBenchRun(f *testing.F) {
	key := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1700000000e9), 7)
	header := []byte(`{"id":"7","label":"x","commit":"abc"}`)
	v := append(binary.AppendUvarint(nil, uint64(len(header))), header...)
	v = append(v, 1, '{', '}')
	f.Add(key, v)
	f.Add(key, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add(key, []byte{3, '{', '}', '!'})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		if _, err := decodeBenchRun(k, v); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("not ErrCorrupt: %v", err)
		}
	})
}
