package top

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/bpfperf/bpfperf/api"
)

// progs1000 is one daemon reading of 1,000 busy programs at t.
func progs1000(t time.Time, tick uint64) []api.ProgRow {
	out := make([]api.ProgRow, 1000)
	for i := range out {
		id := uint32(1000 + i)
		p := prog(id, fmt.Sprintf("prog_%04d", i), tick*uint64(i+1)*100, tick*uint64(i+1)*100*uint64(50+i%300), t)
		p.Type = []string{"xdp", "sched_cls", "tracepoint", "socket_filter"}[i%4]
		p.Owners = []api.Owner{{PID: 1000 + i%50, Comm: fmt.Sprintf("agent-%d", i%50)}}
		p.Attach = []api.AttachPoint{{LinkID: id, Type: "tcx", Target: fmt.Sprintf("ifindex %d (eth%d) ingress", i%8, i%8)}}
		out[i] = p
	}
	return out
}

// BenchmarkRedraw1000 is one refresh of 1,000 programs at 200x50: fold the
// new reading into the rows, filter, sort, and draw the screen with colour
// styles (the work between one sample arriving and the frame being ready).
func BenchmarkRedraw1000(b *testing.B) {
	m := New(&fakeSource{}, Config{Host: "h", Kernel: "6.18", Interval: time.Second, Styles: ansiStyles(), Now: func() time.Time { return t0 }})
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	readings := [2][]api.ProgRow{progs1000(t0, 1), progs1000(t0.Add(time.Second), 2)}
	m.Update(sampleMsg{at: t0, progs: readings[0]})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var screen string
	for i := 0; i < b.N; i++ {
		at := t0.Add(time.Duration(i+1) * time.Second)
		r := readings[(i+1)%2]
		for j := range r {
			r[j].LastSample = at
			r[j].RunCnt += 1000
			r[j].RunTimeNs += 50_000
		}
		m.Update(sampleMsg{at: at, progs: r})
		screen = m.View()
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/redraw")
	if !strings.Contains(screen, "1000 programs") || len(strings.Split(screen, "\n")) != 50 {
		b.Fatalf("unexpected screen:\n%s", screen)
	}
}

// BenchmarkView1000 is drawing alone (a key press that changes nothing
// but the frame).
func BenchmarkView1000(b *testing.B) {
	m := New(&fakeSource{}, Config{Host: "h", Kernel: "6.18", Interval: time.Second, Styles: ansiStyles(), Now: func() time.Time { return t0 }})
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	m.Update(sampleMsg{at: t0, progs: progs1000(t0, 1)})
	m.Update(sampleMsg{at: t0.Add(time.Second), progs: progs1000(t0.Add(time.Second), 2)})
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		_ = m.View()
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/view")
}
