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
// a share of one core in real time and the bytes per sample.
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
		raw := st.Groups["raw"]
		// Per (program, counter, timestamp) at 1 s: raw bytes over every
		// program-second, three counters each.
		perLogical := float64(raw.Bytes) / float64(res.Logical*3)
		b.ReportMetric(cpu.Seconds()/simulated.Seconds()*100, "ingest-cpu-%")
		b.ReportMetric(perLogical, "bytes/sample")
		b.ReportMetric(raw.BytesPerSample(3), "bytes/stored-sample")
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

// BenchmarkYearSize writes two days of 100 programs (the same mix, scaled
// down), merges and compacts as the daemon would in steady state, and
// extrapolates to a year of 1,000 programs: 7 days of raw samples, minute
// rollups for the default minute retention and hour rollups for a year.
func BenchmarkYearSize(b *testing.B) {
	small := storegen.Mix{Idle: mix.Idle / 10, Steady: mix.Steady / 10, Bursty: mix.Bursty / 10}
	const days = 2
	for range b.N {
		path := filepath.Join(b.TempDir(), "bpfperf.db")
		db, err := store.Open(path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
		end := start.Add(days * 24 * time.Hour)
		if _, err := storegen.Generate(db, storegen.Config{Mix: small, Start: start, Duration: end.Sub(start), Batch: 3600}); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Merge(end.Add(24 * time.Hour)); err != nil {
			b.Fatal(err)
		}
		st, err := db.Stats()
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
		_, compactedFile, err := store.Compact(path)
		if err != nil {
			b.Fatal(err)
		}
		// The pages in use: bbolt grows the file ahead of them.
		db, err = store.Open(path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		compacted := db.UsedBytes()
		db.Close()
		b.ReportMetric(float64(compactedFile)/float64(compacted), "file/used")
		raw, m, h := st.Groups["raw"], st.Groups["1m0s"], st.Groups["1h0m0s"]
		payload := float64(raw.Bytes + m.Bytes + h.Bytes)
		overhead := float64(compacted) / payload
		perProg := func(bytes int64) float64 { return float64(bytes) / float64(small.Total()) / days } // per program-day
		year := float64(mix.Total()) * overhead *
			(perProg(raw.Bytes)*7 + perProg(m.Bytes)*float64(store.DefaultMinuteDays) + perProg(h.Bytes)*365)
		b.ReportMetric(overhead, "file/payload")
		b.ReportMetric(perProg(raw.Bytes)/1024, "raw-KiB/prog-day")
		b.ReportMetric(perProg(m.Bytes)/1024, "1m-KiB/prog-day")
		b.ReportMetric(perProg(h.Bytes)/1024, "1h-KiB/prog-day")
		b.ReportMetric(year/(1<<30), "year-GiB-est")
		allMinutes := float64(mix.Total()) * overhead * (perProg(raw.Bytes)*7 + perProg(m.Bytes)*365 + perProg(h.Bytes)*365)
		b.ReportMetric(allMinutes/(1<<30), "year-GiB-if-minutes-kept-a-year")
	}
}
