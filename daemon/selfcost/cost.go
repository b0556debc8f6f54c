// Package selfcost is what the daemon itself costs the host: its CPU over
// the last minute, its resident and live heap memory, and the freed heap it
// hands back after a burst.
package selfcost

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bpfperf/bpfperf/api"
)

// Cost tracks the daemon's own CPU time and memory, so it can report what
// watching costs. CPU % is over the last minute, relative to one CPU.
type Cost struct {
	mu      sync.Mutex
	samples []costSample // ring of the last minute
}

type costSample struct {
	at  time.Time
	cpu time.Duration
}

const costWindow = time.Minute

// Sample reads the CPU time used so far; the loop calls it each tick.
func (c *Cost) Sample(now time.Time) {
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

// Read returns CPU % over the window and the resident set size in bytes.
func (c *Cost) Read() (cpuPercent float64, rss int64) {
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
