package stat

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestMeasureDeltas drives Measure with scripted readings (the kernel
// tests are in cmd/bpfperf): a program present throughout counts from the
// first reading, one that appears counts from zero, one that vanishes
// counts up to its last reading, an id reused by another tag is a new
// program, an idle one is left out unless named.
func TestMeasureDeltas(t *testing.T) {
	r := func(id uint32, name, tag string, runs uint64) Reading {
		return Reading{ID: id, Type: "xdp", Name: name, Tag: tag, Counters: Counters{RunCnt: runs, RunTimeNs: runs * 10}}
	}
	script := [][]Reading{
		{r(1, "steady", "a", 100), r(2, "idle", "b", 5), r(3, "goes", "c", 7), r(5, "reused", "e", 50)},
		{r(1, "steady", "a", 150), r(2, "idle", "b", 5), r(3, "goes", "c", 9), r(4, "comes", "d", 3), r(5, "reused2", "f", 2)},
		{r(1, "steady", "a", 180), r(2, "idle", "b", 5), r(4, "comes", "d", 8), r(5, "reused2", "f", 6)},
	}
	var mu sync.Mutex
	i := 0
	middle := make(chan struct{})
	read := func() ([]Reading, error) {
		mu.Lock()
		defer mu.Unlock()
		rs := script[min(i, len(script)-1)]
		if i++; i == 2 {
			close(middle)
		}
		return rs, nil
	}
	// The command ends after the middle reading.
	run := func(context.Context) (func() int, error) {
		return func() int { <-middle; return 3 }, nil
	}
	m, err := Measure(context.Background(), Config{Read: read, Interval: time.Millisecond}, run)
	if err != nil {
		t.Fatal(err)
	}
	if m.ExitCode != 3 || m.Readings < 3 {
		t.Errorf("exit %d after %d readings, want 3 after 3 or more", m.ExitCode, m.Readings)
	}
	want := map[uint32]Program{
		1: {Delta: Counters{80, 800, 0}},
		3: {Delta: Counters{2, 20, 0}, Unloaded: true},
		4: {Delta: Counters{8, 80, 0}, Loaded: true},
		5: {Delta: Counters{6, 60, 0}, Loaded: true},
	}
	if len(m.Programs) != len(want) {
		t.Fatalf("programs %+v, want ids 1, 3, 4, 5", m.Programs)
	}
	for _, p := range m.Programs {
		w := want[p.ID]
		if p.Delta != w.Delta || p.Loaded != w.Loaded || p.Unloaded != w.Unloaded {
			t.Errorf("program %d: %+v, want %+v", p.ID, p, w)
		}
	}
	// Named, the idle program is reported with zero runs, and alone.
	i, middle = 0, make(chan struct{})
	m, _ = Measure(context.Background(), Config{Read: read, Interval: time.Millisecond, Named: func(r Reading) bool { return r.Name == "idle" }}, run)
	if len(m.Programs) != 1 || m.Programs[0].ID != 2 || m.Programs[0].Delta.RunCnt != 0 {
		t.Errorf("--prog idle: %+v", m.Programs)
	}
}
