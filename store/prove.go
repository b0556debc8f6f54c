package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A store is proved sound before anything writes to it, and the proof
// reads the whole page tree. bbolt reads pages through mmap and trusts
// them: a damaged page can panic in a goroutine of bbolt's own (the
// open-time free-list walk, Tx.Check), fault on a page past the end of the
// file, or send a walk round a loop of pages, growing memory until the OOM
// killer comes. None of that can be recovered or interrupted in-process.
// So the walk runs in a child: this same executable, started again with
// proveEnv set, which store's init turns into the checker before main
// runs. The parent bounds its time and memory and turns any way it ends
// other than a report into "damaged".
const (
	proveEnv     = "BPFPERF_STORE_PROVE"      // the file to prove
	proveModeEnv = "BPFPERF_STORE_PROVE_MODE" // "pages" or "full"
	proveLocked  = 3                          // exit status: the file is locked
)

// Limits of a proof's child. A healthy walk of a 1 GiB store takes a few
// seconds and a few tens of MiB; what goes past these is a runaway walk.
var (
	proveBaseTime    = 10 * time.Second
	proveTimePerGiB  = 30 * time.Second
	proveMaxAnonMiB  = int64(192)
	provePollEvery   = 20 * time.Millisecond
	proveChildMemory = int64(128 << 20) // the child's GC target (debug.SetMemoryLimit)
)

func init() {
	if path := os.Getenv(proveEnv); path != "" {
		os.Exit(proveChild(path, os.Getenv(proveModeEnv)))
	}
}

// proveReport is what the child prints on stdout.
type proveReport struct {
	Problems []string `json:"problems"`
	// Newer is set when the store is sound but of a newer schema.
	Newer string `json:"newer,omitempty"`
}

// proveChild runs in the child: walk the pages with plain reads
// (rawprove.go), then open read-only (no free-list walk at open), walk
// every page with bbolt's checks, and in full mode decode every record too.
func proveChild(path, mode string) int {
	debug.SetMemoryLimit(proveChildMemory)
	if problems := rawProve(path); len(problems) > 0 {
		json.NewEncoder(os.Stdout).Encode(proveReport{Problems: problems})
		return 0
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 200 * time.Millisecond, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return proveLocked
		}
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d := &DB{bolt: db, path: path, heads: map[string]*chunk{}, touched: map[string]int64{}}
	var problems []string
	if mode == "full" {
		problems, err = d.Check()
	} else {
		problems, err = d.checkPages()
		if err == nil && len(problems) == 0 {
			err = d.checkReadable()
		}
	}
	rep := proveReport{Problems: problems}
	switch {
	case err != nil:
		rep.Problems = append(rep.Problems, err.Error())
	case len(problems) == 0 && mode == "full":
		if v := d.schemaVersion(); v > SchemaVersion {
			rep.Newer = fmt.Sprintf("schema %d, this bpfperf reads up to %d", v, SchemaVersion)
		}
	}
	json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// schemaVersion is the store's schema, 0 where it has none.
func (db *DB) schemaVersion() uint32 {
	v := uint32(0)
	db.view(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil && len(meta.Get(keySchema)) == 4 {
			v = binary.BigEndian.Uint32(meta.Get(keySchema))
		}
		return nil
	})
	return v
}

// checkReadable is the start-up proof's look at what Open reads next: the
// schema version and the records loadTouched decodes.
func (db *DB) checkReadable() error {
	older := false
	err := db.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta != nil && len(meta.Get(keySchema)) != 4 {
			return fmt.Errorf("%w: schema version missing", ErrCorrupt)
		}
		// An older schema lacks buckets the migration adds.
		older = meta == nil || tx.Bucket(bucketHead) == nil || tx.Bucket(bucketPrograms) == nil
		return nil
	})
	if err != nil || older {
		return err
	}
	return db.loadTouched()
}

// proveInChild runs the checker on path in a child and returns what it
// found. A child that crashes, runs past its time, or grows past its
// memory is itself the finding.
func proveInChild(ctx context.Context, path string, size int64, mode string) ([]string, error) {
	rep, err := runProveChild(ctx, path, size, mode)
	if err == nil && rep.Newer != "" {
		err = fmt.Errorf("%w: %s", ErrNewerSchema, rep.Newer)
	}
	return rep.Problems, err
}

func runProveChild(ctx context.Context, path string, size int64, mode string) (proveReport, error) {
	exe, err := os.Executable()
	if err != nil {
		return proveReport{}, fmt.Errorf("find this program to check the store with: %w", err)
	}
	if os.Getenv(proveEnv) != "" {
		return proveReport{}, errors.New("store check: already in a checker") // never recurse
	}
	limit := proveBaseTime + time.Duration(float64(proveTimePerGiB)*float64(size)/(1<<30))
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), proveEnv+"="+path, proveModeEnv+"="+mode)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &limitedBuffer{buf: &stderr, max: 64 << 10}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return proveReport{}, fmt.Errorf("start the store checker: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(provePollEvery)
	defer tick.Stop()
	var killedFor string
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-ctx.Done():
			cmd.Process.Kill()
			err = <-done
			if ctx.Err() == context.DeadlineExceeded {
				killedFor = fmt.Sprintf("reading its pages did not finish in %s (a loop in the page tree)", limit.Round(time.Second))
			} else {
				return proveReport{}, ctx.Err()
			}
			break wait
		case <-tick.C:
			if mib := anonMiB(cmd.Process.Pid); mib > proveMaxAnonMiB {
				cmd.Process.Kill()
				<-done
				killedFor = fmt.Sprintf("reading its pages used more than %d MiB (a loop in the page tree)", proveMaxAnonMiB)
				break wait
			}
		}
	}
	if killedFor != "" {
		return proveReport{Problems: []string{killedFor}}, nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == proveLocked {
		return proveReport{}, ErrLocked
	}
	var rep proveReport
	if err == nil && json.Unmarshal(stdout.Bytes(), &rep) == nil {
		return rep, nil
	}
	return proveReport{Problems: []string{crashFinding(stderr.String())}}, nil
}

// crashFinding says what a crashed walk hit, naming the page when the
// crash message does, and never passing Go's runtime text on.
func crashFinding(stderr string) string {
	if m := pageInPanic.FindStringSubmatch(stderr); m != nil {
		return fmt.Sprintf("page %s is damaged: reading it crashes the reader", m[1])
	}
	return "a page is damaged: reading the page tree crashes the reader"
}

var pageInPanic = regexp.MustCompile(`(?i)\bpage(?: id)?\s*[:(]?\s*(\d+)`)

// anonMiB is the child's anonymous memory: its heap and stacks, not the
// store's file pages it maps.
func anonMiB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb >> 10
		}
	}
	return 0
}

// limitedBuffer keeps the first max bytes a child writes: a crash's stack
// can be long, and only its first lines say anything.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
