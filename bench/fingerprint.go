package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Fingerprint describes the machine and build a result was measured on;
// every report carries one, so numbers are never compared blind.
type Fingerprint struct {
	Kernel   string `json:"kernel"`
	CPUModel string `json:"cpu_model"`
	CPUs     int    `json:"cpus"`
	// JIT holds the net.core.bpf_jit_* sysctls.
	JIT map[string]string `json:"jit"`
	// Vulnerabilities holds /sys/devices/system/cpu/vulnerabilities/*: the
	// Spectre & co. mitigations in force.
	Vulnerabilities map[string]string `json:"vulnerabilities"`
	// Stats says whether bpf_stats counted during the run and why.
	Stats StatsMode `json:"stats"`
	Tool  string    `json:"tool_version"`
	// Commit is the VCS revision the tool was built from, if known.
	Commit    string `json:"git_commit,omitempty"`
	GoVersion string `json:"go_version"`
}

// StatsMode records what run-time statistics did during a run. They cost
// about 45 ns per program run, so a result is only comparable with one
// taken in the same mode.
type StatsMode struct {
	// Counting is true when the kernel counted run time during the run.
	Counting bool `json:"counting"`
	// Source says who turned counting on: "--with-stats", "another holder"
	// (a BPF_ENABLE_STATS fd elsewhere, e.g. bpfperfd), "sysctl", or "off".
	Source string `json:"source"`
	// Changed is true when counting was not the same at start and end.
	Changed bool `json:"changed,omitempty"`
}

func (m StatsMode) String() string {
	s := "off"
	if m.Counting {
		s = "on (" + m.Source + ")"
	}
	if m.Changed {
		s += ", changed during the run"
	}
	return s
}

// Env is where the fingerprint comes from. Roots are configurable so tests
// can point them at a fixture tree.
type Env struct {
	ProcRoot string // default /proc
	SysRoot  string // default /sys
	Version  string // tool version; default from the build info
	Commit   string // git commit; default from the build info
}

func (e Env) proc(p ...string) string {
	return filepath.Join(append([]string{cmpOr(e.ProcRoot, "/proc")}, p...)...)
}

func (e Env) sys(p ...string) string {
	return filepath.Join(append([]string{cmpOr(e.SysRoot, "/sys")}, p...)...)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Fingerprint reads the machine description. Stats is left for the runner
// to fill in.
func (e Env) Fingerprint() Fingerprint {
	fp := Fingerprint{
		Kernel:          readTrim(e.proc("sys/kernel/osrelease")),
		CPUModel:        cpuModel(e.proc("cpuinfo")),
		CPUs:            runtime.NumCPU(),
		JIT:             map[string]string{},
		Vulnerabilities: map[string]string{},
		Tool:            e.Version,
		Commit:          e.Commit,
		GoVersion:       runtime.Version(),
	}
	if fp.Kernel == "" {
		var u unix.Utsname
		if unix.Uname(&u) == nil {
			fp.Kernel = unix.ByteSliceToString(u.Release[:])
		}
	}
	for _, k := range []string{"bpf_jit_enable", "bpf_jit_harden", "bpf_jit_kallsyms", "bpf_jit_limit"} {
		if v := readTrim(e.proc("sys/net/core", k)); v != "" {
			fp.JIT[k] = v
		}
	}
	if v := readTrim(e.proc("sys/kernel/unprivileged_bpf_disabled")); v != "" {
		fp.JIT["unprivileged_bpf_disabled"] = v
	}
	vdir := e.sys("devices/system/cpu/vulnerabilities")
	if ents, err := os.ReadDir(vdir); err == nil {
		for _, ent := range ents {
			fp.Vulnerabilities[ent.Name()] = readTrim(filepath.Join(vdir, ent.Name()))
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if fp.Tool == "" {
			fp.Tool = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && fp.Commit == "" {
				fp.Commit = s.Value
			}
			if s.Key == "vcs.modified" && s.Value == "true" && fp.Commit != "" && !strings.HasSuffix(fp.Commit, "-dirty") {
				fp.Commit += "-dirty"
			}
		}
	}
	return fp
}

// Lines renders the fingerprint as sorted "key: value" lines, the form Go
// benchmark files use for configuration.
func (fp Fingerprint) Lines() []string {
	lines := []string{
		"kernel: " + fp.Kernel,
		"cpu: " + fp.CPUModel,
		fmt.Sprintf("cpus: %d", fp.CPUs),
		"bpf-stats: " + fp.Stats.String(),
		"tool: " + fp.Tool,
	}
	if fp.Commit != "" {
		lines = append(lines, "commit: "+fp.Commit)
	}
	for _, k := range sortedKeys(fp.JIT) {
		lines = append(lines, strings.ReplaceAll(k, "_", "-")+": "+fp.JIT[k])
	}
	for _, k := range sortedKeys(fp.Vulnerabilities) {
		lines = append(lines, "vuln-"+k+": "+fp.Vulnerabilities[k])
	}
	return lines
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	return parseCPUModel(f)
}

func parseCPUModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// statsCounting reports whether the kernel counts run time right now: it
// runs a fresh program once and looks at its run count. This is the only
// honest test: a stats fd held by another process is invisible otherwise.
func statsCounting() (bool, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "bpfperf_stats",
		Type:         ebpf.SocketFilter,
		License:      "MIT",
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, 0, asm.DWord), asm.Return()},
	})
	if err != nil {
		return false, fmt.Errorf("load stats probe: %w", err)
	}
	defer prog.Close()
	if _, _, err := testRun(prog, Input{Data: make([]byte, 14)}, 1); err != nil {
		return false, err
	}
	st, err := prog.Stats()
	if err != nil {
		return false, fmt.Errorf("stats probe: %w", err)
	}
	return st.RunCount > 0, nil
}
