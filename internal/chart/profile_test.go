package chart_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	pprof "github.com/google/pprof/profile"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bpfperf/bpfperf/internal/node"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// checkProfileLines: a CPU profile taken by `bpfperf profile capture` in
// the chart's pod (its daemon samples, reads kallsyms and the programs'
// line info with the chart's capabilities) puts the most samples of a
// program running on the host on its hot line, named by function and
// source file:line as the kernel's own BTF line info for the program
// says, read here through cilium/ebpf (the oracle, outside the daemon).
// The program is bpf/profile/hot.c's hot_entry, whose time goes to spin's
// line marked HOT.
func checkProfileLines(t *testing.T, n *node.Node, p *chartPod) {
	t.Helper()
	prog, err := privtest.LoadHotEntry(filepath.Join(root, "profile", "hot_bpfel_test.o"))
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	want := hotLineFromKernel(t, prog)

	stop := privtest.SpinUntil(t, prog)
	code, stdout, stderr, err := p.execOut(n, []string{"/usr/local/bin/bpfperf", "--socket", p.socket, "profile", "capture", "--duration", "2s", "-o", "-"})
	stop()
	if err != nil || code != 0 {
		t.Fatalf("bpfperf profile capture in the pod: exit %d, %v\n%s", code, err, stderr)
	}
	t.Logf("bpfperf profile capture in the pod: %s", strings.TrimSpace(strings.SplitN(string(stderr), "\n", 2)[0]))
	prof, err := pprof.ParseData(stdout)
	if err != nil {
		t.Fatalf("the pod's profile: %v", err)
	}
	byLine := map[string]int64{}
	var hottest string
	for _, s := range prof.Sample {
		if len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Location[0].Line[0].Function == nil {
			continue
		}
		l := s.Location[0].Line[0]
		k := fmt.Sprintf("%s %s:%d", l.Function.Name, filepath.Base(l.Function.Filename), l.Line)
		byLine[k] += s.Value[0]
		if hottest == "" || byLine[k] > byLine[hottest] {
			hottest = k
		}
	}
	if hottest != want {
		t.Errorf("the pod's profile: hottest line %q (%d samples), want %q as the kernel's line info says (%d samples); by line: %v", hottest, byLine[hottest], want, byLine[want], byLine)
	}
	t.Logf("the pod's profile: %d samples on %s (the kernel's line info: %s), %d lines sampled", byLine[hottest], hottest, want, len(byLine))
}

// hotLineFromKernel reads the loaded program's line info back from the
// kernel and returns the line whose source text is marked HOT, as
// "FUNC FILE:LINE": FUNC the BTF function whose instructions hold it.
func hotLineFromKernel(t *testing.T, prog *ebpf.Program) string {
	t.Helper()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	lines, err := info.LineInfos()
	if err != nil {
		t.Fatalf("the program's line info: %v", err)
	}
	funcs, err := info.FuncInfos()
	if err != nil {
		t.Fatalf("the program's func info: %v", err)
	}
	for _, l := range lines {
		if !strings.Contains(l.Line.Line(), "/* HOT */") {
			continue
		}
		fn := ""
		for _, f := range funcs { // sorted by offset
			if f.Offset <= l.Offset {
				fn = f.Func.Name
			}
		}
		return fmt.Sprintf("%s %s:%d", fn, filepath.Base(l.Line.FileName()), l.Line.LineNumber())
	}
	t.Fatalf("no line of the program's line info is marked HOT (%d lines)", len(lines))
	return ""
}

// execOut runs cmd in the pod's container and returns its stdout and
// stderr apart.
func (p *chartPod) execOut(n *node.Node, cmd []string) (int32, []byte, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := n.Runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: p.pod.Containers[0].ID, Cmd: cmd, Timeout: 20})
	if err != nil {
		return -1, nil, nil, err
	}
	return r.ExitCode, r.Stdout, r.Stderr, nil
}
