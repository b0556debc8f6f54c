package collectors

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

func TestTmpIterLoop(t *testing.T) {
	if os.Getenv("TMP_STATS") != "" {
		runtimeStatsOn(t)
	}
	n, _ := strconv.Atoi(os.Getenv("TMP_N"))
	if n == 0 {
		t.Skip()
	}
	it, err := NewProgIter()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var progs []*ebpf.Program
	defer func() {
		for _, p := range progs {
			p.Close()
		}
	}()
	for len(progs) < n {
		p, err := privtest.LoadSocketFilter(fmt.Sprintf("tmp_%d", len(progs)))
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, p)
	}
	fmt.Println("LOADED")
	buf := make([]Sample, 0, n+100)
	var ds []time.Duration
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		start := time.Now()
		if buf, err = it.Sweep(buf[:0]); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	t.Logf("median %v", median(ds))
}

func runtimeStatsOn(t *testing.T) {
	s, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
}
