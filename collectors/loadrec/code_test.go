package loadrec

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// codeSeen is what OnCode reported.
type codeSeen struct {
	mu   sync.Mutex
	made []Ksym
	gone []Ksym
}

func (c *codeSeen) find(name string, gone bool) (Ksym, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.made
	if gone {
		list = c.gone
	}
	for _, k := range list {
		if k.Name == name {
			return k, true
		}
	}
	return Ksym{}, false
}

// TestTrampolineKsyms (in the VM: TestLoadRecordsInVM): attaching an
// fentry program makes a trampoline, which the follower reports through
// OnCode with the name and address /proc/kallsyms gives it
// (bpf_trampoline_<key>, the traced function's BTF id in the key's low
// bits); detaching it reports the same code gone, and kallsyms no longer
// lists it. No program load is reported for it.
func TestTrampolineKsyms(t *testing.T) {
	if !vmtest.InVM() {
		t.Skip("needs fentry: runs in the VM (TestLoadRecordsInVM)")
	}
	privtest.Root(t)
	var c codeSeen
	var s seen
	cfg := s.config()
	cfg.OnCode = func(k Ksym, gone bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if gone {
			c.gone = append(c.gone, k)
		} else {
			c.made = append(c.made, k)
		}
	}
	open(t, cfg)

	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "loadrec_fentry", Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry, AttachTo: privtest.GetppidBody, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatalf("fentry on %s: %v", privtest.GetppidBody, err)
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		t.Fatalf("attach fentry on %s: %v", privtest.GetppidBody, err)
	}
	// The kernel's name for the trampoline: its key is the BTF object's
	// id above 32 bits, a bit saying it is a BTF object's (bit 31), and
	// the traced function's type id below.
	fn := privtest.KernelFuncID(t, privtest.GetppidBody)
	addr, name := kallsymsBPF(t, func(name string) bool {
		key, ok := strings.CutPrefix(name, "bpf_trampoline_")
		k, err := strconv.ParseUint(key, 10, 64)
		return ok && err == nil && uint32(k)&0x7fffffff == fn
	})
	if name == "" {
		l.Close()
		t.Fatalf("/proc/kallsyms lists no bpf_trampoline_ with %s's BTF id %d", privtest.GetppidBody, fn)
	}
	var made Ksym
	privtest.WaitFor(t, "the trampoline "+name+" reported", func() (ok bool) {
		made, ok = c.find(name, false)
		return ok
	})
	if made.Addr != addr || made.Len == 0 || made.Len > 64<<10 {
		t.Errorf("reported %+v, want %s at %#x (kallsyms) with its length", made, name, addr)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var gone Ksym
	privtest.WaitFor(t, "the trampoline "+name+" reported gone", func() (ok bool) {
		gone, ok = c.find(name, true)
		return ok
	})
	if gone.Addr != addr {
		t.Errorf("gone %+v, want %#x", gone, addr)
	}
	if a, _ := kallsymsBPF(t, func(n string) bool { return n == name }); a != 0 {
		t.Errorf("/proc/kallsyms still lists %s after the detach", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ld := range s.loads {
		for _, k := range ld.Ksyms {
			if k.Name == name {
				t.Errorf("load %+v claimed the trampoline's ksymbol", ld)
			}
		}
	}
}

// kallsymsBPF returns the address and name of the first [bpf] symbol of
// /proc/kallsyms whose name match accepts (0, "" for none).
func kallsymsBPF(t *testing.T, match func(name string) bool) (uint64, string) {
	t.Helper()
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "[bpf]" || !match(fields[2]) {
			continue
		}
		var addr uint64
		if _, err := fmt.Sscanf(fields[0], "%x", &addr); err != nil {
			t.Fatal(err)
		}
		return addr, fields[2]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return 0, ""
}
