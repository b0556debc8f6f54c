// Package podnames names the daemon's containers by their Kubernetes pods:
// loaders, holders and triggers carry a cgroup path, which gives a pod's uid
// and a container id at most; the node's CRI socket (internal/pods) gives
// namespace, pod, container and workload. No caller ever waits for the
// runtime: Lookup answers from a cache, and what the cache lacks is asked
// by a goroutine of its own, so a slow or dead socket costs the sampler's
// tick and the load-record ring nothing.
package podnames

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/cadence"
	"github.com/bpfperf/bpfperf/internal/evict"
	"github.com/bpfperf/bpfperf/internal/pods"
)

// Off is the --cri.socket value that turns pod names off.
const Off = "none"

const (
	// maxEntries bounds the containers kept: one node's, and the recent
	// dead ones whose programs and trigger windows still name them.
	maxEntries = 4096
	// maxQueued bounds the lookups waiting for the goroutine; past it a
	// lookup is dropped and asked again at the next Lookup.
	maxQueued = 256
	// retry is how long a container the runtime did not list, or a lookup
	// that failed, stays unknown before it is asked again; also how often
	// a socket that is missing or refuses is tried again.
	retry = 5 * time.Second // Config.Retry's default
	// askAgain is when a container the runtime did not list is asked
	// again: past the index's MinInterval.
	askAgain = 1100 * time.Millisecond
	// relist is how old a listing may grow while no lookup asks.
	relist = 30 * time.Second
)

// Config configures Names.
type Config struct {
	// Socket is the CRI socket; "" picks the first of pods.DefaultSockets
	// that exists (looked for again while none does), Off turns names off.
	Socket string
	Logger *slog.Logger
	// Index is the CRI's Config, less Socket (tests shorten its times).
	Index pods.Config
	// Retry is how often a socket that is missing or refuses is tried
	// again; 5 s when 0.
	Retry time.Duration
}

// Names is the cache of pods by container id, filled in the background.
// A nil *Names names nothing.
type Names struct {
	socket string // as configured: "" for the first of the usual that exists
	off    string // why names are off, "" while on
	log    *slog.Logger
	retry  time.Duration
	want   chan string
	stop   context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	icfg    pods.Config // its Socket the one in use (or last tried)
	idx     *pods.Index
	openErr error // why the socket could not be opened, while it cannot
	cache   map[string]entry
	failed  bool // the last lookup's listing failed: nothing waits on it
}

// entry is what is known of one container id.
type entry struct {
	pod     *collectors.Pod // nil: not (yet) known
	pending bool            // asked, not answered yet
	at      time.Time       // when answered or asked
	// asked is how often the runtime said it lists no such container: a
	// container started within the index's MinInterval of its last
	// listing is not listed yet, so the first "no" is asked again.
	asked int
}

// Open starts naming pods from cfg's socket. A socket that is missing or
// refuses is no error: Status says so, containers keep their ids, and the
// socket is tried again every few seconds.
func Open(cfg Config) *Names {
	n := &Names{log: cfg.Logger, icfg: cfg.Index, retry: cmp.Or(cfg.Retry, retry), cache: map[string]entry{}, want: make(chan string, maxQueued), done: make(chan struct{})}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Socket == Off {
		n.off = "off (--cri.socket " + Off + "): containers are named by pod uid and container id"
		close(n.done)
		return n
	}
	// "": the first of the usual sockets that exists, looked for again
	// at each retry while none does (a runtime started after the daemon).
	n.socket = cfg.Socket
	n.reopen()
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	go n.run(ctx)
	return n
}

// reopen opens the index where it is not open; the socket may have come
// back.
func (n *Names) reopen() *pods.Index {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.idx != nil {
		return n.idx
	}
	socket := n.socket
	if socket == "" {
		if socket = firstExisting(pods.DefaultSockets); socket == "" {
			n.openErr = fmt.Errorf("no CRI socket at %s (--cri.socket names one)", strings.Join(pods.DefaultSockets, " or "))
			return nil
		}
	}
	n.icfg.Socket = socket
	idx, err := pods.Open(n.icfg)
	n.idx, n.openErr = idx, err
	return idx
}

// firstExisting is the first of paths that exists, "" for none.
func firstExisting(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Close stops the lookups.
func (n *Names) Close() error {
	if n == nil || n.stop == nil {
		return nil
	}
	n.stop()
	<-n.done
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.idx != nil {
		return n.idx.Close()
	}
	return nil
}

// Lookup names the container of a cgroup path: its pod where the CRI has
// listed it, nil otherwise. pending says it has been asked and the answer
// is not in yet: a caller that may wait (an identity about to settle) waits
// for it; nothing else does. It never blocks on the runtime.
func (n *Names) Lookup(cgroup string) (pod *collectors.Pod, pending bool) {
	if n == nil || n.off != "" {
		return nil, false
	}
	id, ok := pods.ContainerID(cgroup)
	if !ok {
		return nil, false
	}
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	// While the socket is down, nothing waits for an answer that will be
	// "not answering".
	up := !n.failed && n.openErr == nil
	e, known := n.cache[id]
	switch {
	case known && (e.pod != nil || e.pending):
		return e.pod, e.pending && up
	case known && now.Sub(e.at) < n.retry:
		return nil, false
	}
	select {
	case n.want <- id:
	default:
		return nil, false // the queue is full: asked again next time
	}
	if len(n.cache) >= maxEntries {
		evict.OldestQuarter(n.cache, func(e entry) time.Time { return e.at })
	}
	n.cache[id] = entry{pending: true, at: now}
	return nil, up
}

// run answers the queued lookups one at a time, and while the socket is
// missing or refusing tries it again every retry, so that Status tells
// when it is back even where no lookup asks.
func (n *Names) run(ctx context.Context) {
	defer close(n.done)
	tick := cadence.NewTicker(n.retry) // waking with the daemon's ticks
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-n.want:
			n.answer(ctx, id)
		case <-tick.C:
			if n.due() {
				n.answer(ctx, "") // lists again: no container has id ""
			}
		}
	}
}

// due says whether the goroutine should list now, though no lookup asks:
// the socket is down (to tell when it is back), has gone (a runtime
// stopped: status says so at once, not at the next lookup), or the
// listing is older than relist (status counts the node's containers).
func (n *Names) due() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failed || n.openErr != nil {
		if n.idx != nil {
			// A connection that failed waits out gRPC's backoff (up to
			// two minutes) before it dials again: a new one dials now.
			n.idx.Close()
			n.idx = nil
		}
		return true
	}
	if _, err := os.Stat(n.icfg.Socket); err != nil {
		return true
	}
	return n.idx == nil || time.Since(n.idx.Status().Listed) >= relist
}

// answer asks the runtime for container id and keeps the answer.
func (n *Names) answer(ctx context.Context, id string) {
	idx := n.reopen()
	var c pods.Container
	err := pods.ErrNoSocket
	if idx != nil {
		c, err = idx.Container(ctx, id)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	wasDown := n.failed || n.openErr != nil
	n.failed = err != nil && !errors.Is(err, pods.ErrNotFound)
	down := n.failed || n.openErr != nil
	switch {
	case down && !wasDown:
		n.log.Warn("pod names: the CRI socket does not answer; containers are named by pod uid and container id until it does", "err", err)
	case !down && wasDown:
		n.log.Info("pod names: the CRI socket answers", "socket", n.icfg.Socket)
	}
	if id == "" {
		return
	}
	e := entry{at: time.Now(), asked: n.cache[id].asked + 1}
	switch {
	case err == nil && c.Pod != nil:
		e.pod = podOf(c)
	case errors.Is(err, pods.ErrNotFound) && e.asked == 1:
		// Listed just before the container started, maybe: ask again
		// once the index lists again (its MinInterval, 1 s).
		e.pending = true
		time.AfterFunc(askAgain, func() {
			select {
			case n.want <- id:
			default:
				n.mu.Lock()
				n.cache[id] = entry{at: time.Now(), asked: 2}
				n.mu.Unlock()
			}
		})
	}
	n.cache[id] = e
}

// podOf is the collectors' view of a CRI container.
func podOf(c pods.Container) *collectors.Pod {
	return &collectors.Pod{
		Namespace: c.Pod.Namespace, Pod: c.Pod.Name, UID: c.Pod.UID, Container: c.Name, ContainerID: c.ID,
		Workload: c.Pod.Workload.String(),
	}
}

// Status is one line for `bpfperf status`: where pod names come from, or
// why there are none.
func (n *Names) Status() string {
	if n == nil {
		return ""
	}
	if n.off != "" {
		return n.off
	}
	n.mu.Lock()
	idx, openErr, socket, known := n.idx, n.openErr, n.icfg.Socket, 0
	for _, e := range n.cache {
		if e.pod != nil {
			known++
		}
	}
	n.mu.Unlock()
	const fallback = "; containers are named by pod uid and container id until it answers"
	switch {
	case openErr != nil:
		return openErr.Error() + fallback
	case idx == nil:
		return "CRI socket " + socket + ": connecting again" + fallback
	}
	st := idx.Status()
	if st.Err != nil {
		return st.Err.Error() + fallback
	}
	s := "CRI socket " + st.Socket
	if st.Listed.IsZero() {
		return s + ": connected, not listed yet"
	}
	s += ": " + strconv.Itoa(st.Containers) + " containers and sandboxes listed " + time.Since(st.Listed).Round(time.Second).String() + " ago, " +
		strconv.Itoa(known) + " named here"
	if st.Dropped > 0 {
		s += ", " + strconv.Itoa(st.Dropped) + " past the bound not kept"
	}
	return s
}
