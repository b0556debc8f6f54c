package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bpfperf/bpfperf/profile"
)

// ProfileHz is the sampling rate of test profiles, per CPU: a test's
// measurements last tens of milliseconds by default (10 of 4 ms), which
// the daemon's 99 Hz would see a handful of times. cpu-clock is a
// software event (a timer, not an NMI), which keeps 999 Hz cheap.
const ProfileHz = 999

// ProfileSuffix ends every test profile's file name.
const ProfileSuffix = ".pb.gz"

// ProfileDir writes a CPU profile of each test's measurements to a
// directory, DIR/<test name>.pb.gz (bpfperf bench --profile DIR): the
// kernel stacks of the measuring threads while they ran, BPF programs
// symbolized to source lines, the test-run loop around them included.
// Only the CPUs the runner pins are sampled, every CPU when it does not
// pin. Pass Measuring as Options.Measuring; tests run one at a time.
type ProfileDir struct {
	dir   string
	rec   *profile.Recorder
	used  map[string]bool // file names taken in this run
	files []ProfileFile
	errs  []error
}

// ProfileFile is one test's profile, written.
type ProfileFile struct {
	Test    string
	Path    string
	Samples int64
	// Span is how long the measurements, and so the sampling, lasted.
	Span time.Duration
}

// OpenProfileDir makes dir if it is absent, checks that profiles can be
// written in it, and opens the sampler on cpus (none: every CPU). A bad
// dir fails here, before any test runs, with ErrProfileDir.
func OpenProfileDir(dir string, cpus []int) (*ProfileDir, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: no directory named", ErrProfileDir)
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("%w: not a directory", ErrProfileDir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: cannot make it: %v", ErrProfileDir, pathErrorCause(err))
	}
	probe, err := os.CreateTemp(dir, ".bpfperf-probe-*")
	if err != nil {
		return nil, fmt.Errorf("%w: cannot create files in it: %v", ErrProfileDir, pathErrorCause(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	rec, err := profile.NewRecorder(profile.RecorderConfig{Hz: ProfileHz, CPUs: cpus, MaxDuration: time.Hour})
	if err != nil {
		return nil, err
	}
	return &ProfileDir{dir: dir, rec: rec, used: map[string]bool{}}, nil
}

// pathErrorCause is what went wrong without the operation and path, which
// the caller names.
func pathErrorCause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Close releases the sampler.
func (d *ProfileDir) Close() error { return d.rec.Close() }

// Measuring starts sampling for t's measurements on threads; the function
// it returns stops it and writes the profile of those threads, unless the
// measurements failed.
func (d *ProfileDir) Measuring(t Test, threads []uint32) func(error) {
	span := d.rec.Start(context.Background())
	return func(measureErr error) {
		span.Stop()
		if measureErr != nil {
			return
		}
		if err := d.write(t.Name, span, threads); err != nil {
			d.errs = append(d.errs, fmt.Errorf("profile of %s: %w", t.Name, err))
		}
	}
}

func (d *ProfileDir) write(test string, span *profile.Span, threads []uint32) error {
	p, err := span.Profile(profile.BuildOptions{All: true, Threads: threads})
	if err != nil {
		return err
	}
	data, err := profile.Marshal(p)
	if err != nil {
		return err
	}
	f := ProfileFile{Test: test, Span: time.Duration(p.DurationNanos)}
	for _, s := range p.Sample {
		f.Samples += s.Value[0]
	}
	f.Path = filepath.Join(d.dir, d.fileName(test))
	if err := os.WriteFile(f.Path, data, 0o644); err != nil {
		return err
	}
	d.files = append(d.files, f)
	return nil
}

// fileName is test's name made a file name, unique in this run: a
// suite's names are unique, but two may read the same once sanitized.
func (d *ProfileDir) fileName(test string) string {
	base := SanitizeTestName(test)
	name := base + ProfileSuffix
	for i := 2; d.used[name]; i++ {
		name = base + "-" + strconv.Itoa(i) + ProfileSuffix
	}
	d.used[name] = true
	return name
}

// Files are the profiles written so far, in test order.
func (d *ProfileDir) Files() []ProfileFile { return d.files }

// Err is every profile that could not be written, joined.
func (d *ProfileDir) Err() error { return errors.Join(d.errs...) }

// maxNameBytes keeps a sanitized name, suffix and a "-N" below common
// file systems' 255-byte limit.
const maxNameBytes = 200

// SanitizeTestName turns a test name into a file name: "/" and anything
// but letters, digits and "._=+-" become "_" ("maps/hash/lookup/size=1K"
// is "maps_hash_lookup_size=1K"), a leading "." too, so that no name is
// hidden or climbs out of the directory.
func SanitizeTestName(name string) string {
	var b strings.Builder
	for i, r := range name {
		ok := r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._=+-", r))
		if !ok || (i == 0 && r == '.') {
			r = '_'
		}
		if b.Len() >= maxNameBytes {
			break
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
