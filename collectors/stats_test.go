package collectors

import (
	"os"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

const statsSysctl = "/proc/sys/kernel/bpf_stats_enabled"

func readSysctl(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(statsSysctl)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func writeSysctl(tb testing.TB, v string) {
	tb.Helper()
	if err := os.WriteFile(statsSysctl, []byte(v+"\n"), 0); err != nil {
		tb.Fatal(err)
	}
}

// lockStats serializes on the kernel's stats state, puts the sysctl back to
// the host's value when the test ends (even on failure), sets it to start,
// and reports whether something outside this test keeps stats on anyway.
func lockStats(t *testing.T, start string) (othersCounting bool) {
	t.Helper()
	privtest.Root(t)
	privtest.LockStats(t)
	host := readSysctl(t)
	t.Cleanup(func() { writeSysctl(t, host) })
	writeSysctl(t, start)
	othersCounting = counting(t)
	if othersCounting && start == "0" {
		t.Log("another process holds a stats fd: cannot check that Restore stops counting")
	}
	return othersCounting
}

func counting(t *testing.T) bool {
	t.Helper()
	on, err := privtest.StatsCounting()
	if err != nil {
		t.Fatal(err)
	}
	return on
}

func enableStats(t *testing.T, mode string) *Stats {
	t.Helper()
	s, err := EnableStats(StatsConfig{ProcRoot: "/proc", Mode: mode})
	if err != nil {
		t.Fatalf("enable stats (%s): %v", mode, err)
	}
	t.Cleanup(func() { s.Restore() })
	return s
}

func restore(t *testing.T, s *Stats) {
	t.Helper()
	if err := s.Restore(); err != nil {
		t.Fatalf("restore: %v", err)
	}
}

func TestEnableStatsFD(t *testing.T) {
	for _, mode := range []string{"fd", "auto"} {
		t.Run(mode, func(t *testing.T) {
			others := lockStats(t, "0")
			s := enableStats(t, mode)
			if s.Mode() != StatsFD {
				t.Errorf("mode %s", s.Mode())
			}
			if !counting(t) {
				t.Error("kernel does not count with the stats fd held")
			}
			if v := readSysctl(t); v != "0" {
				t.Errorf("sysctl reads %s with only an fd holding stats on, want 0", v)
			}
			restore(t, s)
			restore(t, s)
			if !others && counting(t) {
				t.Error("kernel still counts after Restore closed the fd")
			}
		})
	}
}

func TestEnableStatsFDDetailSeesSysctl(t *testing.T) {
	lockStats(t, "1")
	s := enableStats(t, "fd")
	if d := s.Detail(); !strings.Contains(d, "also reads 1") {
		t.Errorf("Detail() = %q, want it to say the sysctl also reads 1", d)
	}
}

func TestEnableStatsSysctl(t *testing.T) {
	others := lockStats(t, "0")
	s := enableStats(t, "sysctl")
	if s.Mode() != StatsSysctl {
		t.Errorf("mode %s", s.Mode())
	}
	if v := readSysctl(t); v != "1" {
		t.Errorf("sysctl reads %s after enable, want 1", v)
	}
	if !counting(t) {
		t.Error("kernel does not count with the sysctl at 1")
	}
	if d := s.Detail(); !strings.Contains(d, "0 -> 1") {
		t.Errorf("Detail() = %q, want it to say 0 -> 1", d)
	}
	restore(t, s)
	if v := readSysctl(t); v != "0" {
		t.Errorf("sysctl reads %s after Restore, want 0", v)
	}
	if !others && counting(t) {
		t.Error("kernel still counts after Restore")
	}
	// A second Restore must not write again.
	writeSysctl(t, "1")
	restore(t, s)
	if v := readSysctl(t); v != "1" {
		t.Errorf("second Restore wrote the sysctl: reads %s", v)
	}
}

func TestEnableStatsSysctlAlreadyOn(t *testing.T) {
	lockStats(t, "1")
	s := enableStats(t, "sysctl")
	if d := s.Detail(); !strings.Contains(d, "already 1") {
		t.Errorf("Detail() = %q, want it to say the sysctl was already 1", d)
	}
	restore(t, s)
	if v := readSysctl(t); v != "1" {
		t.Errorf("sysctl reads %s after Restore, want it left at 1", v)
	}
	if !counting(t) {
		t.Error("kernel stopped counting after Restore of a sysctl found at 1")
	}
}

func TestEnableStatsBadMode(t *testing.T) {
	if s, err := EnableStats(StatsConfig{Mode: "always"}); err == nil {
		s.Restore()
		t.Error("mode \"always\" accepted")
	}
}
