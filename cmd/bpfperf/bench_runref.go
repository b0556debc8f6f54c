package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/bench"
)

// A run to compare or plot is a file (a JSON report, or a Go benchmark file
// for compare) or a stored run: run:REF, or REF alone when no file has that
// name, where REF is a run id, last (the newest stored run) or last~N (N
// runs before it).
const runRefUsage = "BASE and NEW are files (JSON reports from bench --save, or Go benchmark files) or stored runs: run:ID, or ID, last, last~N when no such file exists"

var runRefPattern = regexp.MustCompile(`^([0-9]+|last(~[0-9]+)?)$`)

// storedRef says whether arg names a stored run, and which.
func storedRef(arg string) (string, bool, error) {
	if ref, ok := strings.CutPrefix(arg, "run:"); ok {
		return ref, true, nil
	}
	_, err := os.Stat(arg)
	switch {
	case err == nil:
		return "", false, nil
	case runRefPattern.MatchString(arg):
		return arg, true, nil
	case errors.Is(err, os.ErrNotExist):
		return "", false, fmt.Errorf("%s: no such file, and not a stored run (run:ID, ID, last, last~N)", arg)
	}
	return "", false, err
}

// runLoader reads runs named on the command line, dialing the daemon once
// and only if a stored run is named.
type runLoader struct {
	c      *cli.Context
	dial   clientFactory
	client *api.Client
	// fps holds the fingerprint of each run read, nil where the file
	// carries none (Go benchmark format).
	fps []*bench.Fingerprint
}

// mismatch says how the first two runs' machines differ in ways that move
// every number, or "" when they agree (or one is unknown).
func (l *runLoader) mismatch() string {
	if len(l.fps) < 2 || l.fps[0] == nil || l.fps[1] == nil {
		return ""
	}
	a, b := l.fps[0], l.fps[1]
	var diffs []string
	if a.Stats.Counting != b.Stats.Counting {
		diffs = append(diffs, fmt.Sprintf("bpf_stats %s vs %s (about 45 ns per run apart)", a.Stats, b.Stats))
	}
	if a.Kernel != b.Kernel {
		diffs = append(diffs, fmt.Sprintf("kernel %s vs %s", a.Kernel, b.Kernel))
	}
	if a.CPUModel != b.CPUModel || a.CPUs != b.CPUs {
		diffs = append(diffs, fmt.Sprintf("CPU %d x %s vs %d x %s", a.CPUs, a.CPUModel, b.CPUs, b.CPUModel))
	}
	if len(diffs) == 0 {
		return ""
	}
	return "the runs differ in " + strings.Join(diffs, "; ")
}

// stored fetches a stored run's report and its id.
func (l *runLoader) stored(ref string) (*bench.Report, uint64, error) {
	if l.client == nil {
		client, err := l.dial(l.c)
		if err != nil {
			return nil, 0, fmt.Errorf("stored run %s: %w", ref, err)
		}
		l.client = client
	}
	return l.client.BenchReport(ref)
}

// samples reads a file or a stored run.
func (l *runLoader) samples(arg string) (bench.Samples, error) {
	ref, ok, err := storedRef(arg)
	if err != nil {
		return nil, err
	}
	if !ok {
		var fp *bench.Fingerprint
		if rep, err := l.report(arg); err == nil { // a JSON report
			fp = &rep.Fingerprint
		}
		l.fps = append(l.fps, fp)
		return bench.ReadSamples(arg)
	}
	rep, _, err := l.stored(ref)
	if err != nil {
		return nil, err
	}
	l.fps = append(l.fps, &rep.Fingerprint)
	s := bench.SamplesOf(rep)
	if len(s) == 0 {
		return nil, fmt.Errorf("stored run %s: no results in it (every test skipped or failed)", ref)
	}
	return s, nil
}

// report reads a JSON report file or a stored run.
func (l *runLoader) report(arg string) (*bench.Report, error) {
	ref, ok, err := storedRef(arg)
	switch {
	case err != nil:
		return nil, err
	case ok:
		rep, _, err := l.stored(ref)
		return rep, err
	}
	f, err := os.Open(arg)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep, err := bench.ReadJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", arg, err)
	}
	return rep, nil
}
