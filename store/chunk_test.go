package store

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

type sample struct {
	t      int64
	values []uint64
}

func roundTrip(t *testing.T, columns int, in []sample) *chunk {
	t.Helper()
	c := &chunk{columns: columns}
	for _, s := range in {
		if err := c.append(s.t, s.values); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	var got []sample
	d, err := decodeChunk(c.buf, func(ts int64, v []uint64) {
		got = append(got, sample{ts, append([]uint64(nil), v...)})
	})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(got) != len(in) {
		t.Fatalf("decoded %d samples, want %d", len(got), len(in))
	}
	for i := range in {
		if got[i].t != in[i].t {
			t.Fatalf("sample %d: t = %d, want %d", i, got[i].t, in[i].t)
		}
		for j := range in[i].values {
			if got[i].values[j] != in[i].values[j] {
				t.Fatalf("sample %d column %d: %d, want %d", i, j, got[i].values[j], in[i].values[j])
			}
		}
	}
	return d
}

func TestChunkIdleCostsOneBytePerTick(t *testing.T) {
	var in []sample
	for i := range 120 {
		in = append(in, sample{int64(1_700_000_000_000 + i*1000), []uint64{123456789, 4242, 0}})
	}
	c := roundTrip(t, 3, in)
	// Header, first sample and the first delta take ~20 bytes; every tick
	// after that costs one byte.
	if len(c.buf) > 20+118 {
		t.Errorf("idle chunk of 120 ticks is %d bytes, want <= %d", len(c.buf), 20+118)
	}
}

func TestChunkSteadyRateIsSmall(t *testing.T) {
	var in []sample
	var rt, cnt uint64
	for i := range 120 {
		rt += 50_000 + uint64(i%7)*13 // jitter in run time
		cnt += 1000
		in = append(in, sample{int64(i*1000 + i%3), []uint64{rt, cnt, 0}})
	}
	c := roundTrip(t, 3, in)
	if perSample := float64(len(c.buf)) / float64(3*120); perSample > 2 {
		t.Errorf("steady program costs %.2f bytes per sample, want <= 2", perSample)
	}
}

func TestChunkReopenContinues(t *testing.T) {
	in := []sample{{1000, []uint64{1, 2}}, {2000, []uint64{5, 2}}, {3000, []uint64{9, 3}}}
	c := roundTrip(t, 2, in[:2])
	if err := c.append(in[2].t, in[2].values); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, 2, in) // same bytes as a chunk built in one go
	fresh := roundTrip(t, 2, in)
	if string(fresh.buf) != string(c.buf) {
		t.Errorf("reopened chunk encodes differently:\n%x\n%x", c.buf, fresh.buf)
	}
}

func TestChunkCountGrowsPast127(t *testing.T) {
	var in []sample
	for i := range 300 {
		in = append(in, sample{int64(i), []uint64{uint64(i * i)}})
	}
	roundTrip(t, 1, in)
}

func TestChunkRejectsBadInput(t *testing.T) {
	c := &chunk{columns: 2}
	if err := c.append(10, []uint64{1}); err == nil {
		t.Error("append with the wrong column count succeeded")
	}
	_ = c.append(10, []uint64{1, 2})
	if err := c.append(9, []uint64{1, 2}); err == nil {
		t.Error("append back in time succeeded")
	}
	for _, b := range [][]byte{nil, {0}, {1, 0}, {5, 1, 2}, append(append([]byte(nil), c.buf...), 0)} {
		if _, err := decodeChunk(b, nil); err == nil {
			t.Errorf("decode %x succeeded", b)
		}
	}
}

func FuzzChunk(f *testing.F) {
	f.Add(int64(0), uint64(1), []byte{1, 2, 3, 200, 7})
	f.Add(int64(-5), uint64(1<<63), []byte{255, 0, 255, 0})
	f.Fuzz(func(t *testing.T, t0 int64, v0 uint64, steps []byte) {
		// Derive a series from the fuzz bytes: time steps and counter jumps,
		// including wrap-around and decreases.
		in := []sample{{t0, []uint64{v0, ^v0}}}
		rng := rand.New(rand.NewPCG(uint64(t0), v0))
		for i, s := range steps {
			prev := in[len(in)-1]
			dt := int64(s) * int64(1+i%3)
			if prev.t > (1<<62) || dt < 0 {
				break
			}
			in = append(in, sample{prev.t + dt, []uint64{prev.values[0] + uint64(s)*rng.Uint64N(1<<20), prev.values[1] - uint64(s)}})
		}
		roundTrip(t, 2, in)
	})
}

func FuzzDecodeChunk(f *testing.F) {
	c := &chunk{columns: 3}
	_ = c.append(1, []uint64{1, 2, 3})
	_ = c.append(2, []uint64{4, 5, 6})
	f.Add(c.buf)
	f.Add(binary.AppendUvarint(nil, 1<<40))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeChunk(b, func(int64, []uint64) {})
		if err != nil {
			return
		}
		// Anything that decodes must keep decoding after another append.
		if err := d.append(d.lastT+1, make([]uint64, d.columns)); err != nil {
			t.Fatal(err)
		}
		if _, err := decodeChunk(d.buf, nil); err != nil {
			t.Fatalf("re-decode after append: %v", err)
		}
	})
}

// Chunks written before the column mask existed still decode, and a
// reopened one keeps its encoding.
func TestChunkOldEncodingDecodes(t *testing.T) {
	old := []byte{3, 2, 0xD0, 0x0F, 1, 2, 0xA0, 0x1F, 8, 0, 0, 0, 2}
	var got []sample
	c, err := decodeChunk(old, func(ts int64, v []uint64) { got = append(got, sample{ts, append([]uint64(nil), v...)}) })
	if err != nil {
		t.Fatal(err)
	}
	want := []sample{{1000, []uint64{1, 2}}, {2000, []uint64{5, 2}}, {3000, []uint64{9, 3}}}
	for i := range want {
		if got[i].t != want[i].t || got[i].values[0] != want[i].values[0] || got[i].values[1] != want[i].values[1] {
			t.Fatalf("sample %d = %v, want %v", i, got[i], want[i])
		}
	}
	if err := c.append(4000, []uint64{13, 4}); err != nil {
		t.Fatal(err)
	}
	if c.masked {
		t.Error("a reopened old chunk switched encodings")
	}
	var n int
	if _, err := decodeChunk(c.buf, func(ts int64, v []uint64) { n++ }); err != nil || n != 4 {
		t.Errorf("after append: %d samples, %v", n, err)
	}
}

// A counter that never moves costs nothing per tick.
func TestChunkQuietColumnIsFree(t *testing.T) {
	var in []sample
	for i := range 100 {
		in = append(in, sample{int64(i * 1000), []uint64{uint64(i*i) * 7, uint64(i * i), 0}})
	}
	c := roundTrip(t, 3, in)
	// Two moving columns with a growing rate: dod 14 and 2 each tick, one
	// byte each, plus the head byte: 3 bytes a tick, nothing for the third.
	if len(c.buf) > 20+3*99 {
		t.Errorf("chunk is %d bytes, want <= %d", len(c.buf), 20+3*99)
	}
}
