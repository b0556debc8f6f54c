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
//	header:  count, columns
//	sample 0: t0, then each column's value
//	sample 1: z(t1-t0) << 1 | same, then z(v1-v0) per column unless same
//	sample n: z(dod_t) << 1 | same, then z(dod_v) per column unless same
//
// dod is the delta of deltas. "same" (the low bit) says every column's dod
// is zero, so an idle program or one at a steady rate costs one byte per
// tick for all its counters together.
type chunk struct {
	buf     []byte
	count   int
	columns int
	// State for appending, rebuilt by decoding when a chunk is reopened.
	t0, lastT, lastDT int64
	last, lastDelta   []uint64
	scratch           []uint64
}

const (
	chunkMaxSamples = 120
	chunkMaxBytes   = 2048
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
		c.buf = binary.AppendUvarint(c.buf[:0], 0) // count placeholder, rewritten below
		c.buf = binary.AppendUvarint(c.buf, uint64(c.columns))
		c.buf = binary.AppendVarint(c.buf, t)
		for _, v := range values {
			c.buf = binary.AppendUvarint(c.buf, v)
		}
		c.t0 = t
		c.lastDelta = make([]uint64, c.columns)
	default:
		dt := t - c.lastT
		same := true
		deltas := c.scratch[:0]
		for range values {
			deltas = append(deltas, 0)
		}
		for i, v := range values {
			deltas[i] = v - c.last[i]
			if deltas[i] != c.lastDelta[i] {
				same = false
			}
		}
		flag := uint64(0)
		if same {
			flag = 1
		}
		c.buf = binary.AppendUvarint(c.buf, zigzag(dt-c.lastDT)<<1|flag)
		if !same {
			for i := range deltas {
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
	if r.err != nil || count == 0 || columns == 0 || columns > 64 || count > uint64(len(b)) {
		return nil, errCorruptChunk
	}
	c := &chunk{count: int(count), columns: int(columns)}
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
		c.lastDT += unzigzag(head >> 1)
		c.lastT += c.lastDT
		if head&1 == 0 {
			for i := range c.lastDelta {
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
