package daemon

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// selfCost tracks the daemon's own CPU time and memory, so it can report
// what watching costs. CPU % is over the last minute, relative to one CPU.
type selfCost struct {
	mu      sync.Mutex
	samples []costSample // ring of the last minute
}

type costSample struct {
	at  time.Time
	cpu time.Duration
}

const costWindow = time.Minute

func (c *selfCost) sample(now time.Time) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, costSample{now, cpu})
	for len(c.samples) > 2 && now.Sub(c.samples[1].at) >= costWindow {
		c.samples = c.samples[1:]
	}
}

// read returns CPU % over the window and the resident set size in bytes.
func (c *selfCost) read() (cpuPercent float64, rss int64) {
	c.mu.Lock()
	if n := len(c.samples); n >= 2 {
		first, last := c.samples[0], c.samples[n-1]
		cpuPercent, _ = api.CPUPercent(float64(last.cpu-first.cpu), last.at.Sub(first.at))
	}
	c.mu.Unlock()
	return cpuPercent, residentBytes()
}

// residentBytes reads VmRSS from /proc/self/status.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// self is the daemon's own CPU % (of one core, over the last minute),
// resident and live heap bytes, for status.
func (d *Daemon) self() (cpuPercent float64, rss, heapLive int64) {
	cpuPercent, rss = d.cost.read()
	return cpuPercent, rss, heapLiveBytes()
}
