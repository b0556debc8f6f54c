package profile

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bpfperf/bpfperf/profile/kfilter"
)

// kallsyms is a compact, sorted copy of the text symbols in /proc/kallsyms.
// The text symbols' names are kept back to back in data (about 2 MB of
// the file's 5: addresses, types and other symbols are dropped, and the
// daemon keeps this for its life); each symbol costs 16 bytes more.
type kallsyms struct {
	data      string
	syms      []ksym
	mods      []string
	textStart uint64 // _stext
	textEnd   uint64 // _etext
	loaded    time.Time
	// filterRanges are the BPF and hook code of these symbols for the
	// kernel filter (filter.go), worked out at first use.
	rangesOnce   sync.Once
	filterRanges []kfilter.Range
	// probeRanges are the kprobe and uprobe machinery's code
	// (probeHookFunction), passed only while a probe program is loaded.
	probeRanges []kfilter.Range
}

type ksym struct {
	addr uint64
	off  uint32 // name at data[off:off+n]
	n    uint16
	mod  uint16 // index in mods; 0 is the core kernel ("")
}

// moduleSymbolReach is how far past a module's (or [bpf]'s) symbol an
// address may lie and still be taken as inside it: kallsyms has no sizes,
// and the next symbol may be far away in the module area.
const moduleSymbolReach = 256 << 10

func readKallsyms(path string) (*kallsyms, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	k := &kallsyms{mods: []string{""}, loaded: time.Now()}
	var names []byte
	modIdx := map[string]uint16{"": 0}
	var nonzero bool
	for off := 0; off < len(b); {
		end := bytes.IndexByte(b[off:], '\n')
		if end < 0 {
			end = len(b) - off
		}
		line := b[off : off+end]
		off += end + 1
		// "ffffffff81000000 T _stext" or "... t name\t[module]"
		if len(line) < 20 || line[16] != ' ' || line[18] != ' ' {
			continue
		}
		switch line[17] {
		case 't', 'T', 'w', 'W':
		default:
			continue
		}
		addr, err := strconv.ParseUint(string(line[:16]), 16, 64)
		if err != nil {
			continue
		}
		nonzero = nonzero || addr != 0
		name := line[19:]
		var mod uint16
		if tab := bytes.IndexByte(name, '\t'); tab >= 0 {
			m := string(bytes.Trim(name[tab+1:], "[]"))
			name = name[:tab]
			idx, ok := modIdx[m]
			if !ok {
				idx = uint16(len(k.mods))
				k.mods = append(k.mods, m)
				modIdx[m] = idx
			}
			mod = idx
		}
		if len(name) > 0xffff {
			continue
		}
		k.syms = append(k.syms, ksym{addr: addr, off: uint32(len(names)), n: uint16(len(name)), mod: mod})
		names = append(names, name...)
		if mod == 0 {
			switch string(name) {
			case "_stext":
				k.textStart = addr
			case "_etext":
				k.textEnd = addr
			}
		}
	}
	if !nonzero {
		return nil, fmt.Errorf("read kallsyms: %w", ErrAddressesHidden)
	}
	k.data = string(names)
	k.syms = slices.Clip(k.syms)
	slices.SortStableFunc(k.syms, func(a, b ksym) int { return cmp.Compare(a.addr, b.addr) })
	return k, nil
}

func (k *kallsyms) name(s ksym) string { return k.data[s.off : s.off+uint32(s.n)] }

// inText reports whether addr is in the core kernel's text.
func (k *kallsyms) inText(addr uint64) bool {
	return addr >= k.textStart && addr < k.textEnd
}

// lookup returns the symbol containing addr.
func (k *kallsyms) lookup(addr uint64) (name, mod string, start uint64, ok bool) {
	i, found := slices.BinarySearchFunc(k.syms, addr, func(s ksym, a uint64) int { return cmp.Compare(s.addr, a) })
	if !found {
		i--
	}
	if i < 0 {
		return "", "", 0, false
	}
	s := k.syms[i]
	if s.mod == 0 && !k.inText(addr) && addr-s.addr > moduleSymbolReach {
		return "", "", 0, false
	}
	if s.mod != 0 && addr-s.addr > moduleSymbolReach {
		return "", "", 0, false
	}
	return k.name(s), k.mods[s.mod], s.addr, true
}
