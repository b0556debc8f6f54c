package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// Test names become file names that stay in the directory, are not
// hidden, and are unique in a run.
func TestProfileFileNames(t *testing.T) {
	for name, want := range map[string]string{
		"maps/hash/lookup/size=1K/keys=uniform": "maps_hash_lookup_size=1K_keys=uniform",
		"tailcall/chain=33":                     "tailcall_chain=33",
		"../../etc/passwd":                      "_._.._etc_passwd",
		".hidden":                               "_hidden",
		"a b\tc\x00d":                           "a_b_c_d",
		"größe":                                 "gr__e",
		"":                                      "_",
	} {
		if got := SanitizeTestName(name); got != want {
			t.Errorf("SanitizeTestName(%q) = %q, want %q", name, got, want)
		}
	}
	long := SanitizeTestName(string(make([]byte, 1000)))
	if len(long) != maxNameBytes {
		t.Errorf("a 1000-byte name gives %d bytes, want %d", len(long), maxNameBytes)
	}
	d := &ProfileDir{used: map[string]bool{}}
	var got []string
	for _, n := range []string{"a/b", "a_b", "a/b", "c"} {
		got = append(got, d.fileName(n))
	}
	if want := []string{"a_b.pb.gz", "a_b-2.pb.gz", "a_b-3.pb.gz", "c.pb.gz"}; !slices.Equal(got, want) {
		t.Errorf("file names %q, want %q", got, want)
	}
}

// A directory that cannot hold profiles fails OpenProfileDir with
// ErrProfileDir, before a sampler is opened; a missing one is made.
func TestOpenProfileDir(t *testing.T) {
	privtest.Root(t)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	for _, dir := range []string{"", file, filepath.Join(file, "sub"), "/proc/sys"} {
		if d, err := OpenProfileDir(dir, nil); !errors.Is(err, ErrProfileDir) {
			if d != nil {
				d.Close()
			}
			t.Errorf("OpenProfileDir(%q): %v, want ErrProfileDir", dir, err)
		}
	}
	made := filepath.Join(t.TempDir(), "a", "b")
	d, err := OpenProfileDir(made, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if ents, err := os.ReadDir(made); err != nil || len(ents) != 0 {
		t.Errorf("%s: %v, entries %v: want it made, and empty", made, err, ents)
	}
}

// Options.Measuring is called once per test that measures, after its
// warm-up, with one measuring thread per CPU of a parallel run, and not
// for a test skipped before; the function it returns gets the outcome.
func TestMeasuringHook(t *testing.T) {
	privtest.Root(t)
	cfg := DefaultConfig()
	cfg.Filter = regexp.MustCompile(`^baseline/(socket_filter|lwt_seg6local)$`)
	cfg.CPUs, cfg.Measures, cfg.Target = []int{0, 1}, 3, time.Millisecond
	if err := cfg.Validate(); err != nil {
		privtest.Skip(t, "needs two CPUs: "+err.Error())
	}
	type call struct {
		test    string
		threads []uint32
		err     error
		ended   bool
	}
	var calls []*call
	measuring := func(test Test, threads []uint32) func(error) {
		c := &call{test: test.Name, threads: threads}
		calls = append(calls, c)
		return func(err error) { c.err, c.ended = err, true }
	}
	rep, err := Run(context.Background(), Select(Suite(), cfg), cfg, Options{Measuring: measuring})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[1].Skipped == "" {
		t.Fatalf("results %+v: want socket_filter measured and lwt_seg6local skipped", rep.Results)
	}
	if len(calls) != 1 {
		t.Fatalf("%d calls, want 1 (socket_filter only)", len(calls))
	}
	c := calls[0]
	if c.test != "baseline/socket_filter" || len(c.threads) != 2 || c.threads[0] == c.threads[1] || c.threads[0] == 0 ||
		!c.ended || c.err != nil {
		t.Errorf("call %+v: want baseline/socket_filter on two threads, ended without error", *c)
	}
}
