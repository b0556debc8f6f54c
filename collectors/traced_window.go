package collectors

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// tracedWindow is what the exact counters' and the latency windows share:
// an fentry/fexit pair attached around one target program for a bounded
// time. While it runs it holds the target loaded (an attached fentry
// program does); once stopped it holds nothing of the target. It stops
// when its time is up, on Stop, or when nothing besides itself holds the
// target any more.
type tracedWindow struct {
	target  uint32
	tracked bool
	slots   *targetSlots
	// closeCosts closes what costs the target time besides the links
	// (the counters' perf events); may be nil.
	closeCosts func()

	mu     sync.Mutex
	links  []link.Link // detached in reverse order
	reason StopReason
	forget func() // drops the pair from this process's own (own.go)
	done   chan struct{}
	quit   chan struct{}
}

// tracedPair is what a window's loader returns: the two programs, loaded
// against the target, in the order they are attached. Attaching fexit
// first means no run is ever entered without an exit program to see it
// leave; the latency window relies on that.
type tracedPair struct {
	first, second         *ebpf.Program
	firstType, secondType ebpf.AttachType
}

// startTraced reserves a slot for target, opens it, and attaches the pair
// load returns (load gets the target and its main function's BTF name);
// detaching calls closeCosts.
// The pair's fds are closed once attached: the links hold them. On error
// nothing is left attached or reserved.
func startTraced(slots *targetSlots, target uint32, procRoot string, load func(target *ebpf.Program, fn string) (tracedPair, error), closeCosts func()) (*tracedWindow, error) {
	w := &tracedWindow{target: target, slots: slots, closeCosts: closeCosts, done: make(chan struct{}), quit: make(chan struct{})}
	if err := slots.reserve(target); err != nil {
		return nil, err
	}
	if err := w.attach(procRoot, load); err != nil {
		w.detach(StopStopped)
		return nil, err
	}
	return w, nil
}

func (w *tracedWindow) attach(procRoot string, load func(*ebpf.Program, string) (tracedPair, error)) error {
	op := w.op()
	// Look for owners before we open the target ourselves.
	held, err := targetHeld(procRoot, w.target)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	w.tracked = held

	target, err := ebpf.NewProgramFromID(ebpf.ProgramID(w.target))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", op, ErrGone)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	// The links hold the target from here on; our fd must not outlive them.
	defer target.Close()
	fn, err := mainFuncName(target)
	if err != nil {
		return &CounterError{Op: op, Reason: ErrNoBTF, Err: err}
	}
	pair, err := load(target, fn)
	if err != nil {
		return err
	}
	defer pair.first.Close()
	defer pair.second.Close()
	w.forget = MarkOwn(pair.first, pair.second)
	for _, a := range []struct {
		prog *ebpf.Program
		typ  ebpf.AttachType
	}{{pair.first, pair.firstType}, {pair.second, pair.secondType}} {
		l, err := link.AttachTracing(link.TracingOptions{Program: a.prog, AttachType: a.typ})
		if err != nil {
			return tracingError(op+": attach "+a.typ.String(), err)
		}
		w.mu.Lock()
		w.links = append(w.links, l)
		w.mu.Unlock()
	}
	return nil
}

func (w *tracedWindow) op() string { return fmt.Sprintf("%s program %d", w.slots.verb, w.target) }

// mainFuncName returns the BTF name of the program's main function, which
// fentry/fexit attach to.
func mainFuncName(prog *ebpf.Program) (string, error) {
	info, err := prog.Info()
	if err != nil {
		return "", err
	}
	if _, ok := info.BTFID(); !ok {
		return "", errors.New("loaded without BTF")
	}
	funcs, err := info.FuncInfos()
	if err != nil {
		return "", fmt.Errorf("func info: %w", err)
	}
	for _, f := range funcs {
		if f.Offset == 0 && f.Func != nil && f.Func.Name != "" {
			return f.Func.Name, nil
		}
	}
	return "", errors.New("no BTF function at offset 0")
}

// watch stops the window when its time is up, when Stop is called, or when
// nothing besides the window holds the target any more. A target that had
// no visible owner at the start (held by a legacy attachment, a prog array)
// is not watched: the window's bound is all that limits it.
func (w *tracedWindow) watch(window, poll time.Duration, procRoot string) {
	end := time.NewTimer(window)
	defer end.Stop()
	var tick <-chan time.Time
	if w.tracked {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-end.C:
			w.detach(StopEnded)
			return
		case <-w.quit:
			w.detach(StopStopped)
			return
		case <-tick:
			if held, err := targetHeld(procRoot, w.target); err == nil && !held {
				w.detach(StopReleased)
				return
			}
		}
	}
}

// detach drops everything that holds the target or costs it time: the
// links, last attached first, and what closeCosts closes. Maps stay for
// reading.
func (w *tracedWindow) detach(reason StopReason) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reason != StopNone {
		return
	}
	w.reason = reason
	for i := len(w.links) - 1; i >= 0; i-- {
		w.links[i].Close()
	}
	w.links = nil
	if w.closeCosts != nil {
		w.closeCosts()
	}
	if w.forget != nil {
		w.forget()
	}
	w.slots.release(w.target)
	close(w.done)
}

// Target returns the id of the program the window is attached around.
func (w *tracedWindow) Target() uint32 { return w.target }

// Tracked reports whether the window watches the target's owners and
// stops early when they let it go. It does not when the target had no
// process fd, link or pin when the window started.
func (w *tracedWindow) Tracked() bool { return w.tracked }

// Done is closed when the window stops, whatever stopped it (its time,
// its owner letting go, Stop or Close): a caller waits on it rather than
// polling Stopped, which then says why.
func (w *tracedWindow) Done() <-chan struct{} { return w.done }

// Stopped returns why the window stopped, or StopNone while it runs.
func (w *tracedWindow) Stopped() StopReason {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

// Stop detaches from the target now. It returns once the window holds
// nothing of the target. Reading still works afterwards.
func (w *tracedWindow) Stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

// targetSlots bounds how many targets one kind of window runs around at
// once, each at most once: every window adds cost to every run of its
// target.
type targetSlots struct {
	verb string // "count", "time": names the operation in errors
	max  int

	mu     sync.Mutex
	active map[uint32]bool
}

func newTargetSlots(verb string, max int) *targetSlots {
	return &targetSlots{verb: verb, max: max, active: map[uint32]bool{}}
}

func (s *targetSlots) reserve(target uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := fmt.Sprintf("%s program %d", s.verb, target)
	if s.active[target] {
		return fmt.Errorf("%s: already %s it", op, s.doing())
	}
	if len(s.active) >= s.max {
		return &CounterError{Op: op, Reason: ErrTooManyTargets,
			Err: fmt.Errorf("%d of %d targets %s", len(s.active), s.max, s.doing())}
	}
	s.active[target] = true
	return nil
}

func (s *targetSlots) doing() string {
	if s.verb == "count" {
		return "counting"
	}
	return "timing"
}

func (s *targetSlots) release(target uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, target)
}

// ids returns the targets with a window now.
func (s *targetSlots) ids() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]uint32, 0, len(s.active))
	for id := range s.active {
		ids = append(ids, id)
	}
	return ids
}
