package sampler

import (
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/store"
)

// TestHeartbeatBlocks: on the six heartbeat ticks of a minute, idle
// programs are stored by blocks of 2,048 consecutive ids (ids 0-2047 on
// the period's first tick, 2048-4095 ten ticks on, at a 1 s interval),
// each once: a thousand idle programs cost one or two commits a minute;
// and once programs go away, the heartbeat's list keeps none of them (it
// would hold them for the daemon's life).
func TestHeartbeatBlocks(t *testing.T) {
	s := &Sampler{cfg: Config{Interval: time.Second}, progs: map[uint32]*Program{}, sweeps: 1}
	for id := range uint32(10000) {
		s.progs[id] = &Program{key: store.InstanceKey{Boot: 1, ID: id}}
	}
	s.gen = 1
	stored, ticks := map[uint32]int{}, map[uint64]bool{}
	for tick := range uint64(60) {
		s.ticks, s.sweeps = tick, tick+1
		var tk store.Tick
		s.storeHeartbeats(&tk)
		for _, smp := range tk.Samples {
			stored[smp.Key.ID]++
			ticks[tick] = true
			if want := uint64(smp.Key.ID/2048%6) * 10; tick != want {
				t.Errorf("program %d stored at tick %d, want %d", smp.Key.ID, tick, want)
			}
		}
	}
	if len(stored) != 10000 || len(ticks) != 5 {
		t.Errorf("%d programs stored in a minute on %d ticks, want all 10,000 on 5", len(stored), len(ticks))
	}
	for id, n := range stored {
		if n != 1 {
			t.Errorf("program %d stored %d times in a minute, want once", id, n)
		}
	}

	gone := s.progs[5]
	for id := range uint32(10000) {
		if id != 7 {
			delete(s.progs, id)
		}
	}
	s.gen++
	s.ticks, s.sweeps = 60, 61
	var tk store.Tick
	s.storeHeartbeats(&tk)
	if len(tk.Samples) != 1 || tk.Samples[0].Key.ID != 7 {
		t.Errorf("after 9,999 went away the heartbeat stored %+v, want program 7 alone", tk.Samples)
	}
	for _, h := range s.held[:cap(s.held)] {
		if h.p == gone || (h.p != nil && h.id != 7) {
			t.Fatalf("the heartbeat's list still holds program %d, gone", h.id)
		}
	}
}
