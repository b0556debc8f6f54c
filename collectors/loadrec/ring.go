package loadrec

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/perfring"
)

// ring is one CPU's dummy event and its mapped ring buffer, read by hand
// (internal/perfring): go-perf's reader wants samples, and these events
// make none, only side-band records.
type ring struct {
	*perfring.Ring
	withID bool
}

// attr is the dummy event: it counts nothing and samples nothing, and
// exists for the side-band records it asks for. bpf_event (Linux 5.1)
// gives a record per program load and unload, ksymbol (5.1) one per JIT
// image registered or removed; sample_id_all, where withID, appends who
// and when to each (it pads other readers' records: see sampleType).
// Times are CLOCK_MONOTONIC, as bpf_ktime_get_ns in the map's entries.
// A watermark of one byte wakes the reader at every record: the default
// wakes only on samples, which a dummy event never makes.
func attr(withID bool) *unix.PerfEventAttr {
	a := &unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_DUMMY,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits: unix.PerfBitWatermark |
			unix.CBitFieldMaskBit29 | // ksymbol
			unix.CBitFieldMaskBit30, // bpf_event
		Wakeup: 1, // wakeup_watermark, in bytes
	}
	if withID {
		a.Sample_type = sampleType
		a.Bits |= unix.PerfBitSampleIDAll | unix.PerfBitUseClockID
		a.Clockid = unix.CLOCK_MONOTONIC
	}
	return a
}

// ring is withID when its records carry a sample_id.
func openRing(cpu, pages int, withID bool) (*ring, error) {
	fd, err := unix.PerfEventOpen(attr(withID), -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("open dummy perf event on cpu %d: %w", cpu, err)
	}
	r, err := perfring.Map(fd, cpu, pages)
	if err != nil {
		return nil, err
	}
	return &ring{r, withID}, nil
}

// read passes every record the ring holds that parse knows to fn and
// frees their room. parse copies records out, so fn may keep them.
func (r *ring) read(fn func(record)) {
	r.Read(func(typ uint32, data []byte) {
		if rec, ok := parse(typ, data, r.withID); ok {
			rec.cpu = r.CPU
			fn(rec)
		}
	})
}
