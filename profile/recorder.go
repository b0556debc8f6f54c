package profile

import (
	"context"
	"errors"
	"time"

	"github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/internal/perfevent"
)

// RecorderConfig says what a Recorder samples.
type RecorderConfig struct {
	// Hz is the number of samples per second and CPU; 0 means DefaultHz.
	Hz int
	// CPUs to sample; nil means every online CPU.
	CPUs []int
	// MaxDuration is the longest span: its samples are kept in memory
	// until it ends, and sampling stops there. 0 means DefaultMaxDuration.
	MaxDuration time.Duration
}

// Recorder samples kernel stacks on cpu-clock over spans its caller marks:
// each run of a command (bpfperf stat --profile), each test's measurements
// (bpfperf bench --profile). Its perf events are opened once, by
// NewRecorder, and stay off between spans. Its profiles are symbolized to
// source lines as the daemon's are, programs loaded and unloaded around a
// span included: the symbolizer learns them while samples land in them.
// It needs CAP_PERFMON (or CAP_SYS_ADMIN).
type Recorder struct {
	sampler *Sampler
	sym     *Symbolizer
}

// NewRecorder opens the sampler and reads kallsyms, which would otherwise
// be read inside the first span, by this process, on a sampled CPU
// perhaps. Close releases it.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	sym := NewSymbolizer(SymbolizerConfig{})
	s, err := NewSampler(SamplerConfig{Event: perfevent.CPUClock, Hz: cfg.Hz, CPUs: cfg.CPUs, MaxDuration: cfg.MaxDuration, Symbolizer: sym})
	if err != nil {
		return nil, err
	}
	sym.LoadKallsyms() // hidden addresses: kernel frames stay unnamed, BPF ones do not
	return &Recorder{sampler: s, sym: sym}, nil
}

// Close releases the perf events.
func (r *Recorder) Close() error { return r.sampler.Close() }

// Span is one sampled span, from Start to Stop.
type Span struct {
	r    *Recorder
	stop context.CancelFunc
	done chan struct{} // closed when the capture has ended
	c    *Capture
	err  error
}

// Start begins a span and returns once every CPU samples (or sampling
// failed to start, which Profile then says), so that the work the span
// profiles can start right after. One span runs at a time; ctx ending
// ends the span too.
//
// The programs loaded by then are learned first: Observe skips addresses
// a learned program covers, so a program loaded where the JIT put one
// since unloaded could be taken for it. Those that went away are
// forgotten once gone at two starts, which bounds what a long suite
// keeps. Where learning fails, samples still resolve through kallsyms.
func (r *Recorder) Start(ctx context.Context) *Span {
	r.sym.Prune()
	r.sym.LearnAll()
	ctx, stop := context.WithCancel(ctx)
	sp := &Span{r: r, stop: stop, done: make(chan struct{})}
	on := make(chan struct{})
	go func() {
		defer close(sp.done)
		sp.c, sp.err = r.sampler.capture(ctx, r.sampler.MaxDuration(), func() { close(on) })
	}()
	select {
	case <-on:
	case <-sp.done:
	}
	return sp
}

// Stop ends the span: sampling is off and the last samples are read when
// it returns. Stopping again does nothing.
func (sp *Span) Stop() {
	sp.stop()
	<-sp.done
}

// Capture stops the span if it still runs and returns what it sampled.
func (sp *Span) Capture() (*Capture, error) {
	sp.Stop()
	if sp.err != nil && !errors.Is(sp.err, context.Canceled) {
		return nil, sp.err
	}
	return sp.c, nil
}

// Profile stops the span if it still runs and builds its profile.
func (sp *Span) Profile(opts BuildOptions) (*profile.Profile, error) {
	c, err := sp.Capture()
	if err != nil {
		return nil, err
	}
	return Build(c, sp.r.sym, opts)
}
