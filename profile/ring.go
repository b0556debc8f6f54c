package profile

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/cgroupid"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/internal/perfring"
)

// ring is one CPU's sampling event and its mapped ring buffer
// (internal/perfring). It is read by hand rather than through go-perf,
// which the project uses for counting events: go-perf cannot ask for
// PERF_SAMPLE_CGROUP (see perfevent.SamplingAttr), and its reader takes
// only events it opened.
type ring struct{ *perfring.Ring }

func openRing(e perfevent.Event, attr *unix.PerfEventAttr, cpu, pages int) (*ring, error) {
	fd, err := perfevent.OpenSampling(e, attr, cpu)
	if err != nil {
		return nil, err
	}
	r, err := perfring.Map(fd, cpu, pages)
	if err != nil {
		return nil, err
	}
	return &ring{r}, nil
}

func (r *ring) enable() error {
	if err := unix.IoctlSetInt(r.FD, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		return fmt.Errorf("enable event on cpu %d: %w", r.CPU, err)
	}
	return nil
}

func (r *ring) disable() { unix.IoctlSetInt(r.FD, unix.PERF_EVENT_IOC_DISABLE, 0) }

// setFrequency changes a frequency-mode event's samples per second.
func (r *ring) setFrequency(hz int) error {
	v := uint64(hz)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(r.FD), unix.PERF_EVENT_IOC_PERIOD, uintptr(unsafe.Pointer(&v)))
	if errno != 0 {
		return fmt.Errorf("set frequency on cpu %d: %w", r.CPU, errno)
	}
	return nil
}

// times are the event's total time enabled and time running on the PMU,
// in ns.
type times struct{ enabled, running uint64 }

func (r *ring) times() times {
	var b [24]byte // perfevent.SampleReadFormat: value, time enabled, time running
	if n, err := unix.Read(r.FD, b[:]); err != nil || n != len(b) {
		return times{}
	}
	return times{enabled: binary.NativeEndian.Uint64(b[8:]), running: binary.NativeEndian.Uint64(b[16:])}
}

// sampleType is what each sample records; the decoder reads this layout.
// withCgroup adds the cgroup (v2) id of the interrupted task, which
// kernels before 5.7 refuse.
const (
	sampleType = unix.PERF_SAMPLE_IP | unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_TIME |
		unix.PERF_SAMPLE_CPU | unix.PERF_SAMPLE_PERIOD | unix.PERF_SAMPLE_CALLCHAIN
	withCgroup = sampleType | unix.PERF_SAMPLE_CGROUP
)

// Offsets in a sample record's data (after the 8-byte header) with
// sampleType. The kernel writes fields in bit order, so the cgroup id
// (bit 21) comes right after the call chain.
const (
	offIP     = 0
	offPID    = 8
	offTID    = 12
	offTime   = 16
	offCPU    = 24
	offPeriod = 32
	offNr     = 40
	offIPs    = 48
)

// read decodes every record the ring holds into c and frees their room.
func (r *ring) read(d *decoder, c *Capture) {
	r.Read(func(typ uint32, data []byte) { d.record(c, typ, data) })
}

// record adds one record (its data, after the header) to c: a sample, a
// count of samples the kernel lost, or a throttle.
func (d *decoder) record(c *Capture, typ uint32, data []byte) {
	switch typ {
	case unix.PERF_RECORD_SAMPLE:
		if s, ok := d.sample(data); ok {
			c.Samples = append(c.Samples, s)
		}
	case unix.PERF_RECORD_LOST:
		if len(data) >= 16 { // id, lost
			c.Lost += binary.NativeEndian.Uint64(data[8:])
		}
	case unix.PERF_RECORD_THROTTLE:
		c.Throttled++
	}
}

// decoder turns raw samples into Samples, sharing identical stacks and
// looking each thread's name up once.
type decoder struct {
	procRoot string
	cgroups  bool // samples end with a cgroup id (withCgroup)
	// cgroupRoot is the cgroup2 mount, for tasks whose samples name the
	// root cgroup (procCgroup); "" where there is none.
	cgroupRoot string
	// perfEventV1: the perf_event controller is bound to a cgroup v1
	// hierarchy, so samples' ids are that hierarchy's, not cgroup2's:
	// every task's cgroup comes from /proc (procCgroup).
	perfEventV1 bool
	tidCgroups  map[uint32]uint64
	toBoot      uint64 // added to sample times: see bootOffset
	stacks      map[string][]uint64
	fresh       [][]uint64 // stacks in the order first seen
	comms       map[uint32]string
}

func newDecoder(procRoot string) *decoder {
	return &decoder{procRoot: procRoot, stacks: map[string][]uint64{}, comms: map[uint32]string{}}
}

func (d *decoder) sample(rec []byte) (Sample, bool) {
	if len(rec) < offIPs {
		return Sample{}, false
	}
	ne := binary.NativeEndian
	nr := ne.Uint64(rec[offNr:])
	if nr > uint64(len(rec)-offIPs)/8 {
		return Sample{}, false
	}
	s := Sample{
		Time:   ne.Uint64(rec[offTime:]) + d.toBoot,
		CPU:    ne.Uint32(rec[offCPU:]),
		PID:    ne.Uint32(rec[offPID:]),
		TID:    ne.Uint32(rec[offTID:]),
		Period: ne.Uint64(rec[offPeriod:]),
	}
	raw := rec[offIPs : offIPs+8*nr]
	if d.cgroups {
		if end := offIPs + 8*nr; uint64(len(rec)) >= end+8 {
			s.Cgroup = ne.Uint64(rec[end:])
		}
		switch {
		case (s.Cgroup == rootCgroupID || d.perfEventV1) && s.TID != 0 && d.cgroupRoot != "":
			s.Cgroup = d.procCgroup(s.PID, s.TID)
		case d.perfEventV1:
			s.Cgroup = rootCgroupID // the idle task: the v1 root's id names nothing here
		}
	}
	st, ok := d.stacks[string(raw)]
	if !ok {
		st = make([]uint64, 0, nr)
		for i := range nr {
			ip := ne.Uint64(raw[8*i:])
			if ip >= contextMax {
				continue // PERF_CONTEXT_KERNEL and friends mark sections
			}
			st = append(st, ip)
		}
		if len(st) == 0 {
			st = nil
		}
		d.stacks[string(raw)] = st
		d.fresh = append(d.fresh, st)
	}
	s.Stack = st
	s.Comm = d.comm(s.PID, s.TID)
	return s, true
}

// rootCgroupID is the cgroup2 root's id (its directory's inode number).
const rootCgroupID = 1

// procCgroup is the cgroup2 id of a task whose samples name the root
// cgroup, or any task's where perf_event is a cgroup v1 controller, read
// from /proc while the capture drains (once a task and capture). A sample's id is the task's cgroup for the perf_event
// controller, which cgroup v2 enables implicitly only below a root whose
// cgroup.subtree_control was written at least once (systemd does it at
// boot): on a host where nobody did (the test VM), every sample names the
// root. There the task's own cgroup, from its /proc entry, is the better
// answer; a task that exited before the drain stays the root's.
func (d *decoder) procCgroup(pid, tid uint32) uint64 {
	if id, ok := d.tidCgroups[tid]; ok {
		return id
	}
	p, t := strconv.FormatUint(uint64(pid), 10), strconv.FormatUint(uint64(tid), 10)
	id, err := cgroupid.OfTask(d.cgroupRoot, d.procRoot+"/"+p+"/task/"+t+"/cgroup")
	if err != nil {
		id = rootCgroupID
	}
	if d.tidCgroups == nil {
		d.tidCgroups = map[uint32]uint64{}
	}
	d.tidCgroups[tid] = id
	return id
}

func (d *decoder) comm(pid, tid uint32) string {
	if c, ok := d.comms[tid]; ok {
		return c
	}
	c := "swapper"
	if tid != 0 {
		p, t := strconv.FormatUint(uint64(pid), 10), strconv.FormatUint(uint64(tid), 10)
		b, err := os.ReadFile(d.procRoot + "/" + p + "/task/" + t + "/comm")
		if err != nil {
			b, err = os.ReadFile(d.procRoot + "/" + t + "/comm")
		}
		if err != nil {
			c = "[exited]"
		} else {
			c = strings.TrimSuffix(string(b), "\n")
		}
	}
	d.comms[tid] = c
	return c
}

// contextMax is PERF_CONTEXT_MAX as an address: callchain entries at or
// above it mark where kernel, user or guest frames begin.
const contextMax = uint64(1<<64 + unix.PERF_CONTEXT_MAX)
