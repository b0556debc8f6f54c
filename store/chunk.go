package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A chunk holds up to chunkMaxSamples consecutive samples of one series:
// timestamps in milliseconds and a fixed number of cumulative counter
// columns.
//
// Encoding (all integers are varints; "z" means zigzag-encoded):
//
//	header:  count, columns | maskedFlag
//	sample 0: t0, then each column's value
//	sample n: z(dod_t) << columns | mask, then z(dod_v) of each column
//	          whose bit is set in mask
//
// dod is the delta of deltas (for sample 1, the plain deltas). mask has a
// bit per column whose dod is not zero, so an idle program or one at a
// steady rate costs one byte per tick for all its counters together, and a
// counter that never moves (recursion_misses) costs nothing.
//
// Chunks written before the mask existed (no maskedFlag) carry one bit
// "all dods are zero" instead of the mask, then every column's dod; they
// still decode, and a reopened one keeps its encoding.
type chunk struct {
	buf     []byte
	count   int
	columns int
	masked  bool
	// State for appending, rebuilt by decoding when a chunk is reopened.
	t0, lastT, lastDT int64
	last, lastDelta   []uint64
	scratch           []uint64
}

const (
	chunkMaxSamples = 120
	chunkMaxBytes   = 2048
	// maskedFlag in the header's column count marks the masked encoding.
	maskedFlag = 0x40
	// maxMaskedColumns keeps z(dod_t) << columns well inside 64 bits.
	maxMaskedColumns = 16
)

var errCorruptChunk = errors.New("corrupt chunk")

// full reports whether the chunk should be sealed and a new one started.
func (c *chunk) full() bool {
	return c.count >= chunkMaxSamples || len(c.buf) >= chunkMaxBytes
}

// append adds one sample. Timestamps must not go backwards; values are
// cumulative counters but may go down (the codec is lossless either way).
func (c *chunk) append(t int64, values []uint64) error {
	if len(values) != c.columns {
		return fmt.Errorf("append %d values to a chunk of %d columns", len(values), c.columns)
	}
	if c.count > 0 && t < c.lastT {
		return fmt.Errorf("append time %d before last %d", t, c.lastT)
	}
	switch c.count {
	case 0:
		c.masked = c.columns <= maxMaskedColumns
		head := uint64(c.columns)
		if c.masked {
			head |= maskedFlag
		}
		c.buf = binary.AppendUvarint(c.buf[:0], 0) // count placeholder, rewritten below
		c.buf = binary.AppendUvarint(c.buf, head)
		c.buf = binary.AppendVarint(c.buf, t)
		for _, v := range values {
			c.buf = binary.AppendUvarint(c.buf, v)
		}
		c.t0 = t
		c.lastDelta = make([]uint64, c.columns)
	default:
		dt := t - c.lastT
		var mask uint64
		deltas := c.scratch[:0]
		for i, v := range values {
			deltas = append(deltas, v-c.last[i])
			if deltas[i] != c.lastDelta[i] {
				mask |= 1 << i
			}
		}
		switch {
		case c.masked:
			c.buf = binary.AppendUvarint(c.buf, zigzag(dt-c.lastDT)<<c.columns|mask)
		case mask == 0:
			c.buf = binary.AppendUvarint(c.buf, zigzag(dt-c.lastDT)<<1|1)
		default:
			c.buf = binary.AppendUvarint(c.buf, zigzag(dt-c.lastDT)<<1)
			mask = 1<<c.columns - 1 // the old encoding writes every column
		}
		for i := range deltas {
			if mask&(1<<i) != 0 {
				c.buf = binary.AppendUvarint(c.buf, zigzag(int64(deltas[i]-c.lastDelta[i])))
			}
		}
		c.lastDT = dt
		// Swap buffers instead of allocating a delta slice per append.
		c.lastDelta, c.scratch = deltas, c.lastDelta
	}
	c.last = append(c.last[:0], values...)
	c.lastT = t
	c.count++
	c.buf = setCount(c.buf, c.count)
	return nil
}

// setCount rewrites the leading count varint. It grows from 1 to 2 bytes at
// 128, so the body may need to shift.
func setCount(buf []byte, count int) []byte {
	_, n := binary.Uvarint(buf)
	var head [binary.MaxVarintLen64]byte
	m := binary.PutUvarint(head[:], uint64(count))
	if m == n {
		copy(buf, head[:m])
		return buf
	}
	out := make([]byte, 0, len(buf)-n+m)
	out = append(out, head[:m]...)
	return append(out, buf[n:]...)
}

// decodeChunk parses a chunk and returns it ready for further appends. It
// calls fn, if not nil, for every sample in order; values is reused between
// calls.
func decodeChunk(b []byte, fn func(t int64, values []uint64)) (*chunk, error) {
	r := reader{b: b}
	count := r.uvarint()
	columns := r.uvarint()
	masked := columns&maskedFlag != 0
	columns &^= maskedFlag
	if r.err != nil || count == 0 || columns == 0 || columns > 63 || (masked && columns > maxMaskedColumns) || count > uint64(len(b)) {
		return nil, errCorruptChunk
	}
	c := &chunk{count: int(count), columns: int(columns), masked: masked}
	c.last = make([]uint64, c.columns)
	c.lastDelta = make([]uint64, c.columns)
	c.t0 = r.varint()
	c.lastT = c.t0
	for i := range c.last {
		c.last[i] = r.uvarint()
	}
	if r.err != nil {
		return nil, errCorruptChunk
	}
	if fn != nil {
		fn(c.lastT, c.last)
	}
	for n := 1; n < c.count; n++ {
		head := r.uvarint()
		var mask uint64
		if c.masked {
			c.lastDT += unzigzag(head >> c.columns)
			mask = head & (1<<c.columns - 1)
		} else {
			c.lastDT += unzigzag(head >> 1)
			if head&1 == 0 {
				mask = 1<<c.columns - 1
			}
		}
		c.lastT += c.lastDT
		for i := range c.lastDelta {
			if mask&(1<<i) != 0 {
				c.lastDelta[i] += uint64(unzigzag(r.uvarint()))
			}
		}
		for i := range c.last {
			c.last[i] += c.lastDelta[i]
		}
		if r.err != nil {
			return nil, errCorruptChunk
		}
		if fn != nil {
			fn(c.lastT, c.last)
		}
	}
	if r.off != len(b) {
		return nil, errCorruptChunk
	}
	c.buf = append([]byte(nil), b...)
	return c, nil
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// reader reads varints and remembers the first error, so a decoder checks
// once per record instead of after every field.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.err = errCorruptChunk
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.err = errCorruptChunk
		return 0
	}
	r.off += n
	return v
}

// A segment packs many sealed chunks of one series into one value, so a
// day of a series is one bbolt value (on exactly sized overflow pages)
// instead of hundreds of small ones scattered over half-full leaf pages. It
// starts with segmentMark, a byte no chunk starts with (a chunk's first
// byte is its sample count, never 0), followed by each chunk as a varint
// length and its bytes.
const segmentMark = 0

func isSegment(v []byte) bool { return len(v) > 0 && v[0] == segmentMark }

// appendToSegment adds a sealed chunk (or the chunks of a segment) to seg.
func appendToSegment(seg, v []byte) []byte {
	if len(seg) == 0 {
		seg = append(seg, segmentMark)
	}
	if isSegment(v) {
		return append(seg, v[1:]...)
	}
	seg = binary.AppendUvarint(seg, uint64(len(v)))
	return append(seg, v...)
}

// sealedChunks calls fn with each chunk of a sealed value: the value itself,
// or every chunk of a segment.
func sealedChunks(v []byte, fn func(c []byte) error) error {
	if !isSegment(v) {
		return fn(v)
	}
	r := reader{b: v, off: 1}
	for r.off < len(v) {
		n := r.uvarint()
		if r.err != nil || n == 0 || n > uint64(len(v)-r.off) {
			return errCorruptChunk
		}
		if err := fn(v[r.off : r.off+int(n)]); err != nil {
			return err
		}
		r.off += int(n)
	}
	return nil
}

// decodeSealed decodes every chunk of a sealed value in order and returns
// the first and the last, for their time bounds.
func decodeSealed(v []byte, fn func(t int64, values []uint64)) (first, last *chunk, err error) {
	err = sealedChunks(v, func(c []byte) error {
		ch, err := decodeChunk(c, fn)
		if err != nil {
			return err
		}
		if first == nil {
			first = ch
		}
		last = ch
		return nil
	})
	if err == nil && first == nil {
		err = errCorruptChunk
	}
	return first, last, err
}
