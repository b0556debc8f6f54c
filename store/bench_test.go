package store_test

import (
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/storegen"
	"github.com/bpfperf/bpfperf/store"
)

// The mix of programs the size and cost figures are measured on.
var mix = storegen.Mix{Idle: 600, Steady: 300, Bursty: 100}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIngest1000 writes an hour of 1,000 programs at 1 s, one
// transaction per tick as the daemon does, and reports the CPU that costs as
// a share of one core in real time, the bytes per sample, and a year's size
// extrapolated from them.
func BenchmarkIngest1000(b *testing.B) {
	for range b.N {
		path := filepath.Join(b.TempDir(), "bpfperf.db")
		db, err := store.Open(path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		const simulated = time.Hour
		cpu0 := cpuTime()
		res, err := storegen.Generate(db, storegen.Config{Mix: mix, Start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Duration: simulated, Batch: 1})
		if err != nil {
			b.Fatal(err)
		}
		cpu := cpuTime() - cpu0
		st, err := db.Stats()
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
		_, compacted, err := store.Compact(path)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(st.FileBytes)/(1<<20), "file-MiB")
		b.ReportMetric(float64(compacted)/(1<<20), "compacted-MiB")
		raw, m, h := st.Groups["raw"], st.Groups["1m0s"], st.Groups["1h0m0s"]
		// Per (program, counter, timestamp) at 1 s: raw bytes over every
		// program-second, three counters each.
		perLogical := float64(raw.Bytes) / float64(res.Logical*3)
		b.ReportMetric(cpu.Seconds()/simulated.Seconds()*100, "ingest-cpu-%")
		b.ReportMetric(perLogical, "bytes/sample")
		b.ReportMetric(raw.BytesPerSample(3), "bytes/stored-sample")
		b.ReportMetric(float64(st.FileBytes)/float64(raw.Bytes+m.Bytes+h.Bytes), "file/payload")
		// A year: 7 days raw, 365 days of minute and hour rollups.
		n := float64(mix.Total())
		rawPerProgSec := float64(raw.Bytes) / n / simulated.Seconds()
		perMinute := float64(m.Bytes) / float64(max(m.Samples, 1))
		perHour := float64(h.Bytes) / float64(max(h.Samples, 1))
		year := n * (rawPerProgSec*7*86400 + perMinute*365*1440 + perHour*365*24)
		b.ReportMetric(perMinute, "bytes/1m-point")
		b.ReportMetric(perHour, "bytes/1h-point")
		b.ReportMetric(year*float64(st.FileBytes)/float64(raw.Bytes+m.Bytes+h.Bytes)/(1<<30), "year-GiB-est")
	}
}

// queryStore builds a store with days of history for programs, fast (many
// ticks per transaction).
func queryStore(b *testing.B, programs storegen.Mix, days int) (*store.DB, time.Time) {
	path := filepath.Join(b.TempDir(), "bpfperf.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	if _, err := storegen.Generate(db, storegen.Config{Mix: programs, Start: start, Duration: time.Duration(days) * 24 * time.Hour, Batch: 3600}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db, start.Add(time.Duration(days) * 24 * time.Hour)
}

func medianOf(runs int, fn func()) time.Duration {
	d := make([]time.Duration, runs)
	for i := range d {
		start := time.Now()
		fn()
		d[i] = time.Since(start)
	}
	slices.Sort(d)
	return d[runs/2]
}

// BenchmarkQuery reports one program's last 24 h at full resolution and its
// last 30 days through minute and hour rollups.
func BenchmarkQuery(b *testing.B) {
	db, end := queryStore(b, storegen.Mix{Idle: 2, Steady: 4, Bursty: 2}, 30)
	progs, err := db.Programs()
	if err != nil {
		b.Fatal(err)
	}
	key := progs[3].Key // a steady one
	b.ResetTimer()
	for range b.N {
		var n24h, n30m, n30h int
		day := medianOf(9, func() {
			p, err := db.Series(key, end.Add(-24*time.Hour), end)
			if err != nil {
				b.Fatal(err)
			}
			n24h = len(p)
		})
		month := medianOf(9, func() {
			p, err := db.Rollups(key, store.Minute, end.Add(-30*24*time.Hour), end)
			if err != nil {
				b.Fatal(err)
			}
			n30m = len(p)
		})
		monthHours := medianOf(9, func() {
			p, err := db.Rollups(key, store.Hour, end.Add(-30*24*time.Hour), end)
			if err != nil {
				b.Fatal(err)
			}
			n30h = len(p)
		})
		if n24h < 86000 || n30m < 43000 || n30h < 719 {
			b.Fatalf("query sizes %d raw, %d minute, %d hour points", n24h, n30m, n30h)
		}
		b.ReportMetric(float64(day.Microseconds())/1000, "24h-raw-ms")
		b.ReportMetric(float64(month.Microseconds())/1000, "30d-1m-ms")
		b.ReportMetric(float64(monthHours.Microseconds())/1000, "30d-1h-ms")
	}
}
