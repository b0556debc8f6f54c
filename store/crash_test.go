package store_test

import (
	"bufio"
	"bytes"
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

// The crash tests re-run this test binary as a writer: it ingests ticks
// of 200 programs as fast as it can and prints each tick's number once
// WriteTick has returned, so the parent knows what was committed. Its
// mode (crashModeEnv) adds what the parent kills it in the middle of: a
// rollup every 10 ticks between "rolling up" and "rolled up" ("rollup"), a profile with every tick, printed as
// "profile TICK ID" once stored ("profile"), or a compaction every 25
// ticks between "compacting" and "compacted" ("compact").
const (
	writerEnv    = "BPFPERF_STORE_CRASH_WRITER"
	crashModeEnv = "BPFPERF_STORE_CRASH_MODE"
)

var crashStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

const crashPrograms = 200

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		os.Exit(crashWriter(path, os.Getenv(crashModeEnv)))
	}
	os.Exit(m.Run())
}

// crashProfile is the profile stored with tick i: 48 KiB that say which
// tick they belong to.
func crashProfile(i int) []byte {
	b := make([]byte, 48<<10)
	r := rand.New(rand.NewPCG(uint64(i), 9))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

func crashWriter(path, mode string) int {
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
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
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
		say("%d", i)
		switch {
		case mode == "rollup" && i%10 == 9:
			say("rolling up")
			if err := db.Rollup(t.Time); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			say("rolled up")
		case mode == "profile":
			id, err := db.PutProfile(store.ProfileInfo{Start: t.Time, Duration: int64(time.Second), Kind: store.ProfileContinuous, Event: "cpu-clock", Hz: 99}, crashProfile(i))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			say("profile %d %s", i, id)
		case mode == "compact" && i%25 == 24:
			db.Close()
			say("compacting")
			if _, _, err := store.Compact(path); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			say("compacted")
			if db, err = store.Open(path, store.Options{Timeout: 5 * time.Second}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	}
}

// TestSurvivesSIGKILL kills the writer 50 times in each mode, a random
// few ms into what the mode adds (a rollup, a profile, a compaction): the
// store must open every time, hold every tick the
// writer saw committed, for every program, with at most the tick in
// flight missing, every profile it saw stored, byte for byte, and pass
// its check.
func TestSurvivesSIGKILL(t *testing.T) {
	for _, mode := range []string{"rollup", "profile", "compact"} {
		t.Run(mode, func(t *testing.T) { survivesSIGKILL(t, mode) })
	}
}

func survivesSIGKILL(t *testing.T, mode string) {
	path := filepath.Join(t.TempDir(), "bpfperf.db")
	rng := rand.New(rand.NewPCG(1, 2))
	committed := -1
	profiles := map[string]int{} // id -> tick, of every profile seen stored
	midway := 0                  // kills that landed inside what the mode adds
	// 50 rounds, and more (up to 200) until 10 kills landed inside: on a
	// loaded machine this process reads the writer's lines late, and a
	// kill aimed inside often lands after.
	round := 0
	for ; round < 50 || (midway < 10 && round < 200); round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+path, crashModeEnv+"="+mode)
		stdout, _ := cmd.StdoutPipe()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1<<16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		inside := false // the last line opened what the mode adds
		seen := func(l string) {
			switch f := strings.Fields(l); {
			case l == "compacting" || l == "rolling up":
				inside = true
			case l == "compacted" || l == "rolled up":
				inside = false
			case len(f) == 3 && f[0] == "profile":
				n, _ := strconv.Atoi(f[1])
				profiles[f[2]] = n
				inside = false
			default:
				n, _ := strconv.Atoi(l)
				committed = max(committed, n)
				inside = mode == "profile" // a profile is written next
			}
		}
		var kill <-chan time.Time
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				seen(l)
				if kill == nil && inside && (mode == "profile" || l == "compacting" || l == "rolling up") && rng.IntN(4) == 0 {
					kill = time.After(time.Duration(rng.IntN(3000)) * time.Microsecond)
				}
			case <-kill:
				cmd.Process.Signal(syscall.SIGKILL)
				break read
			}
		}
		for l := range lines {
			seen(l)
		}
		if inside {
			midway++
		}
		cmd.Wait()
		if strings.Contains(stderr.String(), "panic") || (stderr.Len() > 0 && !strings.Contains(stderr.String(), "signal: killed")) {
			t.Fatalf("round %d: writer failed:\n%s", round, stderr.String())
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
		for id, tick := range profiles {
			_, data, err := db.GetProfile(id)
			if err != nil || !bytes.Equal(data, crashProfile(tick)) {
				t.Fatalf("round %d: profile %s of tick %d: %v (%d bytes)", round, id, tick, err, len(data))
			}
		}
		if problems, err := db.Check(); err != nil || len(problems) > 0 {
			t.Fatalf("round %d: check: %v %v", round, problems, err)
		}
		db.Close()
	}
	if committed < 100 {
		t.Errorf("only %d ticks in %d rounds: the writer barely ran", committed, round)
	}
	t.Logf("%s: %d ticks of %d programs and %d profiles survived %d SIGKILLs, %d of them inside what the mode adds", mode, committed+1, crashPrograms, len(profiles), round, midway)
	if midway < 10 {
		t.Errorf("only %d of %d kills landed inside a %s", midway, round, mode)
	}
}
