package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/cilium/ebpf"
)

// Test is one benchmark: a named program with its input. Tests that share a
// fixture (loaded objects, a filled map) run one after the other and set it
// up once.
type Test struct {
	// Name is unique in a suite, slash separated, with key=value parts
	// where a parameter varies (benchstat reads those as configuration).
	Name  string `json:"name"`
	Group string `json:"group"`
	// Entry is the program BPF_PROG_TEST_RUN runs.
	Entry string `json:"entry"`
	Doc   string `json:"doc,omitempty"`
	// Noisy marks tests whose spread is large by nature.
	Noisy bool `json:"noisy,omitempty"`
	// Labels carry the parameters plots and filters use (type, chain,
	// map, op, size, keys, bytes).
	Labels map[string]string `json:"labels,omitempty"`
	// Quick tests make up the --quick suite.
	Quick bool `json:"quick,omitempty"`

	fixture *fixture
	prepare func(state any) (*Case, error)
}

// fixture is set-up shared by several tests.
type fixture struct {
	open func() (state any, closeFn func(), err error)
}

// Supported lists the program types whose BPF_PROG_TEST_RUN reports a
// duration on Linux 6.18, with the input each needs. Raw tracepoint and
// syscall programs have a test run too, but it refuses repeat and reports
// no time; lwt_seg6local has none.
var Supported = []ebpf.ProgramType{
	ebpf.SocketFilter, ebpf.SchedCLS, ebpf.SchedACT, ebpf.XDP, ebpf.CGroupSKB,
	ebpf.LWTIn, ebpf.LWTOut, ebpf.LWTXmit, ebpf.FlowDissector, ebpf.SkLookup,
	ebpf.Netfilter,
}

// noTiming explains the types the kernel runs but cannot time.
var noTiming = map[ebpf.ProgramType]string{
	ebpf.RawTracepoint: "the kernel runs raw tracepoint programs once, without repeat or duration",
	ebpf.Syscall:       "the kernel runs syscall programs once, without repeat or duration",
	ebpf.LWTSeg6Local:  "the kernel has no test run for lwt_seg6local",
}

func supported(t ebpf.ProgramType) error {
	for _, s := range Supported {
		if s == t {
			return nil
		}
	}
	why := noTiming[t]
	if why == "" {
		why = "the kernel has no timed test run for it"
	}
	return fmt.Errorf("%w: %s: %s (supported: %s)", ErrNoTestRun, t, why, supportedList())
}

func supportedList() string {
	s := ""
	for i, t := range Supported {
		if i > 0 {
			s += ", "
		}
		s += typeName(t)
	}
	return s
}

// typeName is the short, lowercase name of a program type used in test
// names and messages.
func typeName(t ebpf.ProgramType) string {
	switch t {
	case ebpf.SocketFilter:
		return "socket_filter"
	case ebpf.SchedCLS:
		return "sched_cls"
	case ebpf.SchedACT:
		return "sched_act"
	case ebpf.XDP:
		return "xdp"
	case ebpf.CGroupSKB:
		return "cgroup_skb"
	case ebpf.LWTIn:
		return "lwt_in"
	case ebpf.LWTOut:
		return "lwt_out"
	case ebpf.LWTXmit:
		return "lwt_xmit"
	case ebpf.LWTSeg6Local:
		return "lwt_seg6local"
	case ebpf.FlowDissector:
		return "flow_dissector"
	case ebpf.SkLookup:
		return "sk_lookup"
	case ebpf.Netfilter:
		return "netfilter"
	case ebpf.RawTracepoint:
		return "raw_tracepoint"
	case ebpf.Syscall:
		return "syscall"
	}
	return t.String()
}

// DefaultPacket is the data every packet-taking test runs on: a 64-byte
// Ethernet/IPv4/UDP frame.
func DefaultPacket() []byte {
	p := make([]byte, 64)
	for i := 0; i < 12; i++ {
		p[i] = byte(i + 1) // dst and src MAC
	}
	binary.BigEndian.PutUint16(p[12:], 0x0800)
	ip := p[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 50)
	ip[8] = 64
	ip[9] = 17 // UDP
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], 12345)
	binary.BigEndian.PutUint16(udp[2:], 53)
	binary.BigEndian.PutUint16(udp[4:], 30)
	return p
}

// defaultInput is the input a program of type t gets unless the user gives
// one.
func defaultInput(t ebpf.ProgramType) Input {
	if t == ebpf.SkLookup {
		// struct bpf_sk_lookup: no packet, family AF_INET, protocol TCP.
		ctx := make([]byte, 72)
		binary.LittleEndian.PutUint32(ctx[8:], 2)
		binary.LittleEndian.PutUint32(ctx[12:], 6)
		return Input{Context: ctx}
	}
	return Input{Data: DefaultPacket()}
}

// Suite returns the built-in suite. quick marks the trimmed CI subset; the
// full list is returned either way, see Test.Quick.
func Suite() []Test {
	var tests []Test
	tests = append(tests, baselineTests()...)
	tests = append(tests, tailCallTests()...)
	tests = append(tests, mapTests()...)
	tests = append(tests, helperTests()...)
	tests = append(tests, ringbufTests()...)
	return tests
}

// loadOne loads one program of spec, with no maps of its own.
func loadOne(spec *ebpf.CollectionSpec, name string) (*ebpf.Program, error) {
	ps, ok := spec.Programs[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoProgram, name)
	}
	p, err := ebpf.NewProgram(ps)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	return p, nil
}

func baselineTests() []Test {
	fix := &fixture{open: func() (any, func(), error) {
		spec, err := loadBaseline()
		return spec, func() {}, err
	}}
	var tests []Test
	for _, b := range []struct {
		entry string
		typ   ebpf.ProgramType
	}{
		{"base_socket_filter", ebpf.SocketFilter},
		{"base_sched_cls", ebpf.SchedCLS},
		{"base_sched_act", ebpf.SchedACT},
		{"base_xdp", ebpf.XDP},
		{"base_cgroup_skb", ebpf.CGroupSKB},
		{"base_lwt_in", ebpf.LWTIn},
		{"base_lwt_out", ebpf.LWTOut},
		{"base_lwt_xmit", ebpf.LWTXmit},
		{"base_lwt_seg6local", ebpf.LWTSeg6Local},
		{"base_flow_dissector", ebpf.FlowDissector},
		{"base_sk_lookup", ebpf.SkLookup},
		{"base_netfilter", ebpf.Netfilter},
		{"base_raw_tp", ebpf.RawTracepoint},
		{"base_syscall", ebpf.Syscall},
	} {
		tests = append(tests, Test{
			Name:    "baseline/" + typeName(b.typ),
			Group:   "baseline",
			Entry:   b.entry,
			Doc:     "r0 = 0; exit: the cost of the hook's context",
			Labels:  map[string]string{"type": typeName(b.typ)},
			Quick:   true,
			fixture: fix,
			prepare: func(state any) (*Case, error) {
				if err := supported(b.typ); err != nil {
					return nil, err
				}
				p, err := loadOne(state.(*ebpf.CollectionSpec), b.entry)
				if err != nil {
					return nil, err
				}
				return &Case{Program: p, Input: defaultInput(b.typ), Want: want(0), close: func() { p.Close() }}, nil
			},
		})
	}
	return tests
}

// MaxTailCalls is the kernel's MAX_TAIL_CALL_CNT since Linux 5.17; the
// tail-call limit test checks it rather than trusting it.
const MaxTailCalls = 33

// tailSlots is the size of the prog array in tailcall.c.
const tailSlots = 36

func tailCallTests() []Test {
	fix := &fixture{open: func() (any, func(), error) {
		spec, err := loadTailcall()
		if err != nil {
			return nil, nil, err
		}
		coll, err := ebpf.NewCollection(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("load tail-call programs: %w", err)
		}
		return coll, func() { coll.Close() }, nil
	}}
	var tests []Test
	chain := func(name string, slots, depth int, doc string, quick bool) Test {
		return Test{
			Name:    name,
			Group:   "tailcall",
			Entry:   "tail_entry",
			Doc:     doc,
			Labels:  map[string]string{"chain": strconv.Itoa(depth), "slots": strconv.Itoa(slots)},
			Quick:   quick,
			fixture: fix,
			prepare: func(state any) (*Case, error) {
				coll := state.(*ebpf.Collection)
				if err := fillChain(coll, slots); err != nil {
					return nil, err
				}
				return &Case{Program: coll.Programs["tail_entry"], Input: defaultInput(ebpf.SocketFilter), Want: want(uint32(depth))}, nil
			},
		}
	}
	for n := 0; n <= MaxTailCalls; n++ {
		tests = append(tests, chain(fmt.Sprintf("tailcall/chain=%d", n), n, n,
			fmt.Sprintf("a chain of %d tail calls; the last program returns the depth", n), n%4 == 0 || n == MaxTailCalls))
	}
	tests = append(tests, chain("tailcall/limit", tailSlots, MaxTailCalls,
		fmt.Sprintf("all %d slots filled: the kernel must stop the chain at %d", tailSlots, MaxTailCalls), true))
	return tests
}

// fillChain puts step_i in slot i for i < n and empties the other slots.
func fillChain(coll *ebpf.Collection, n int) error {
	jmp := coll.Maps["jmp"]
	for i := 0; i < tailSlots; i++ {
		key := uint32(i)
		if i >= n {
			if err := jmp.Delete(key); err != nil && !isNotExist(err) {
				return fmt.Errorf("clear tail-call slot %d: %w", i, err)
			}
			continue
		}
		step := coll.Programs[fmt.Sprintf("step_%d", i)]
		if err := jmp.Update(key, step, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("fill tail-call slot %d: %w", i, err)
		}
	}
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, ebpf.ErrKeyNotExist) }
