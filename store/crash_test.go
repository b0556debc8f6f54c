package store_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/store"
)

// The crash test re-runs this test binary as a writer: it ingests ticks of
// 200 programs as fast as it can and prints each tick's number once
// WriteTick has returned, so the parent knows what was committed.
const writerEnv = "BPFPERF_STORE_CRASH_WRITER"

var crashStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

const crashPrograms = 200

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		os.Exit(crashWriter(path))
	}
	os.Exit(m.Run())
}

func crashWriter(path string) int {
	db, err := store.Open(path, store.Options{Timeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Continue after the newest tick already stored.
	next := 0
	if pts, err := db.Series(store.InstanceKey{ID: 1}, crashStart, crashStart.Add(1000*time.Hour)); err == nil && len(pts) > 0 {
		next = int(pts[len(pts)-1].Values[store.ColRunCnt]) + 1
	}
	out := bufio.NewWriter(os.Stdout)
	for i := next; ; i++ {
		t := store.Tick{Time: crashStart.Add(time.Duration(i) * time.Second)}
		for id := uint32(1); id <= crashPrograms; id++ {
			key := store.InstanceKey{ID: id}
			if i == 0 {
				t.Loaded = append(t.Loaded, store.Program{Key: key, ID: id, Name: "crash"})
			}
			// run_cnt is the tick number, so the parent can tell which
			// ticks are there.
			t.Samples = append(t.Samples, store.Sample{Key: key, Values: [3]uint64{uint64(i) * uint64(id), uint64(i), 0}})
		}
		if err := db.WriteTick(t); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if i%60 == 0 {
			db.Rollup(t.Time)
		}
		fmt.Fprintln(out, i)
		out.Flush()
	}
}

// TestSurvivesSIGKILL kills the writer at random moments 50 times: the store
// must open every time and hold every tick the writer saw committed, for
// every program, with at most the tick in flight missing.
func TestSurvivesSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bpfperf.db")
	rng := rand.New(rand.NewPCG(1, 2))
	committed := -1
	for round := range 50 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+path)
		stdout, _ := cmd.StdoutPipe()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan int, 1<<16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				n, _ := strconv.Atoi(sc.Text())
				lines <- n
			}
			close(lines)
		}()
		time.Sleep(time.Duration(20+rng.IntN(150)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		for n := range lines {
			committed = max(committed, n)
		}
		cmd.Wait()
		if strings.Contains(stderr.String(), "panic") {
			t.Fatalf("round %d: writer panicked:\n%s", round, stderr.String())
		}

		db, err := store.Open(path, store.Options{})
		if err != nil {
			t.Fatalf("round %d: store does not open after SIGKILL: %v", round, err)
		}
		for _, id := range []uint32{1, crashPrograms / 2, crashPrograms} {
			pts, err := db.Series(store.InstanceKey{ID: id}, crashStart, crashStart.Add(1000*time.Hour))
			if err != nil {
				t.Fatalf("round %d: read program %d: %v", round, id, err)
			}
			// Ticks 0..committed must all be there; one more (in flight
			// when killed, committed but not yet printed) may be.
			if len(pts) < committed+1 || len(pts) > committed+2 {
				t.Fatalf("round %d: program %d has %d ticks, the writer saw %d committed", round, id, len(pts), committed+1)
			}
			for i, p := range pts {
				if p.Values[store.ColRunCnt] != uint64(i) || p.Values[store.ColRunTimeNs] != uint64(i)*uint64(id) {
					t.Fatalf("round %d: program %d tick %d holds %v", round, id, i, p.Values)
				}
			}
			committed = len(pts) - 1
		}
		if problems, err := db.Check(); err != nil || len(problems) > 0 {
			t.Fatalf("round %d: check: %v %v", round, problems, err)
		}
		db.Close()
	}
	if committed < 100 {
		t.Errorf("only %d ticks in 50 rounds: the writer barely ran", committed)
	}
	t.Logf("%d ticks of %d programs survived 50 SIGKILLs", committed+1, crashPrograms)
}
