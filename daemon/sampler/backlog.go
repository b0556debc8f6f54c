package sampler

import "github.com/bpfperf/bpfperf/store"

// maxBacklogSamples bounds the memory held while the store cannot be
// written (a full disk): about 40 bytes a sample, so ~40 MiB.
const maxBacklogSamples = 1_000_000

// backlog keeps ticks the store could not take yet, oldest first. When it is
// over its bound it drops the oldest samples but keeps their ticks' program
// records and events, which are small and which later samples depend on.
type backlog struct {
	ticks   []store.Tick
	samples int
	dropped int // samples dropped since the store last worked
}

func (b *backlog) push(t store.Tick) {
	b.ticks = append(b.ticks, t)
	b.samples += len(t.Samples)
	for b.samples > maxBacklogSamples && len(b.ticks) > 1 {
		old := b.ticks[0]
		b.samples -= len(old.Samples)
		b.dropped += len(old.Samples)
		next := &b.ticks[1]
		next.Loaded = append(old.Loaded, next.Loaded...)
		next.Unloaded = append(old.Unloaded, next.Unloaded...)
		next.Events = append(old.Events, next.Events...)
		b.ticks = b.ticks[1:]
	}
}

// flush writes the ticks in order and stops at the first failure, keeping
// it and the rest. It returns how many ticks it wrote.
func (b *backlog) flush(write func(store.Tick) error) (int, error) {
	n := 0
	for len(b.ticks) > 0 {
		if err := write(b.ticks[0]); err != nil {
			return n, err
		}
		b.samples -= len(b.ticks[0].Samples)
		b.ticks[0] = store.Tick{}
		b.ticks = b.ticks[1:]
		n++
	}
	b.ticks = nil
	return n, nil
}
