package bench

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"gopkg.in/yaml.v3"
)

// Object describes a user's program to benchmark: `bpfperf bench --object`.
type Object struct {
	Name    string // test name; default "user/<program>"
	Path    string // ELF object file
	Program string // program (entry point) in it
	Data    string // file with the packet; default DefaultPacket
	Ctx     string // file with ctx_in; optional
	MapInit string // YAML file of map entries to insert before running
	// Want, if set, is the return value the program must give.
	Want *uint32
}

// MapInit is the content of a map-init file:
//
//	maps:
//	  counters:
//	    - key: 1            # integer: little-endian in the map's key size
//	      value: 0x2a       # or a hex string "0x..." of exactly that size
//	    - key: "0a000001"   # hex bytes
//	      value: 7
type MapInit struct {
	Maps map[string][]MapEntry `yaml:"maps"`
}

// MapEntry is one key and value; each is an integer or a hex string.
type MapEntry struct {
	Key   yaml.Node `yaml:"key"`
	Value yaml.Node `yaml:"value"`
}

// ObjectTest validates o and returns the test that runs it. Everything that
// can be checked without loading into the kernel is checked here, so bad
// input fails before anything runs.
func ObjectTest(o Object) (Test, error) {
	spec, err := loadObjectSpec(o.Path)
	if err != nil {
		return Test{}, err
	}
	ps, ok := spec.Programs[o.Program]
	if !ok {
		return Test{}, fmt.Errorf("%w: %q in %s (it has: %s)", ErrNoProgram, o.Program, o.Path, strings.Join(sortedKeys(spec.Programs), ", "))
	}
	if err := supported(ps.Type); err != nil {
		return Test{}, fmt.Errorf("program %s: %w", o.Program, err)
	}
	in := defaultInput(ps.Type)
	if o.Data != "" {
		if in.Data, err = readInput(o.Data, "data"); err != nil {
			return Test{}, err
		}
	}
	if o.Ctx != "" {
		if in.Context, err = readInput(o.Ctx, "ctx"); err != nil {
			return Test{}, err
		}
	}
	var inits map[string][]kv
	if o.MapInit != "" {
		if inits, err = loadMapInit(o.MapInit, spec); err != nil {
			return Test{}, err
		}
	}
	name := o.Name
	if name == "" {
		name = "user/" + o.Program
	}
	fix := &fixture{open: func() (any, func(), error) {
		coll, err := ebpf.NewCollection(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("load %s: %w", o.Path, err)
		}
		for m, entries := range inits {
			for _, e := range entries {
				if err := coll.Maps[m].Update(e.k, e.v, ebpf.UpdateAny); err != nil {
					coll.Close()
					return nil, nil, fmt.Errorf("%w: map %s: insert key %x: %v", ErrMapInit, m, e.k, err)
				}
			}
		}
		return coll, func() { coll.Close() }, nil
	}}
	return Test{
		Name:    name,
		Group:   "user",
		Entry:   o.Program,
		Doc:     o.Path,
		Labels:  map[string]string{"object": o.Path, "type": typeName(ps.Type)},
		Quick:   true,
		fixture: fix,
		prepare: func(state any) (*Case, error) {
			return &Case{Program: state.(*ebpf.Collection).Programs[o.Program], Input: in, Want: o.Want}, nil
		},
	}, nil
}

func loadObjectSpec(path string) (*ebpf.CollectionSpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := f.ReadAt(magic, 0); err != nil || !bytes.Equal(magic, []byte(elf.ELFMAG)) {
		return nil, fmt.Errorf("%s: %w", path, ErrNotELF)
	}
	spec, err := ebpf.LoadCollectionSpecFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: read BPF object: %w", path, err)
	}
	return spec, nil
}

func readInput(path, what string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: %s file %s is empty", ErrBadConfig, what, path)
	}
	return b, nil
}

type kv struct{ k, v []byte }

// loadMapInit reads a map-init file and checks it against the object's
// maps: the map exists, keys and values have its sizes, the entries fit.
func loadMapInit(path string, spec *ebpf.CollectionSpec) (map[string][]kv, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("map-init: %w", err)
	}
	var mi MapInit
	if err := decodeYAML(path, b, &mi, ErrMapInit); err != nil {
		return nil, err
	}
	out := map[string][]kv{}
	for _, name := range sortedKeys(mi.Maps) {
		ms, ok := spec.Maps[name]
		if !ok {
			return nil, &FileError{Path: path, Msg: fmt.Sprintf("no map %q in the object (it has: %s)", name, strings.Join(sortedKeys(spec.Maps), ", ")), Kind: ErrMapInit}
		}
		entries := mi.Maps[name]
		if uint32(len(entries)) > ms.MaxEntries {
			return nil, &FileError{Path: path, Msg: fmt.Sprintf("map %s holds %d entries, map-init has %d", name, ms.MaxEntries, len(entries)), Kind: ErrMapInit}
		}
		vsize := int(ms.ValueSize)
		perCPU := ms.Type == ebpf.PerCPUArray || ms.Type == ebpf.PerCPUHash || ms.Type == ebpf.LRUCPUHash
		for i, e := range entries {
			bad := func(n *yaml.Node, field string, err error) error {
				line := n.Line
				if line == 0 { // missing: the entry's other half
					line = max(e.Key.Line, e.Value.Line)
				}
				return &FileError{Path: path, Line: line, Field: field, Msg: fmt.Sprintf("%v (map %s, entry %d)", err, name, i+1), Kind: ErrMapInit}
			}
			k, err := scalarBytes(&e.Key, int(ms.KeySize))
			if err != nil {
				return nil, bad(&e.Key, "key", err)
			}
			v, err := scalarBytes(&e.Value, vsize)
			if err != nil {
				return nil, bad(&e.Value, "value", err)
			}
			if ms.Type == ebpf.Array || ms.Type == ebpf.PerCPUArray {
				if idx := binary.LittleEndian.Uint32(k); idx >= ms.MaxEntries {
					return nil, bad(&e.Key, "key", fmt.Errorf("index %d, the array has %d", idx, ms.MaxEntries))
				}
			}
			if perCPU {
				n, err := ebpf.PossibleCPU()
				if err != nil {
					return nil, err
				}
				v = bytes.Repeat(padTo8(v), n)
			}
			out[name] = append(out[name], kv{k, v})
		}
	}
	return out, nil
}

func padTo8(b []byte) []byte {
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// scalarBytes encodes an integer (little-endian, size bytes) or a hex
// string of exactly size bytes.
func scalarBytes(n *yaml.Node, size int) ([]byte, error) {
	switch n.Kind {
	case 0:
		return nil, errors.New("missing")
	case yaml.SequenceNode, yaml.MappingNode:
		return nil, errors.New("want an integer or hex bytes, not a list or mapping")
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, errors.New("missing")
		}
		return scalarBytes(n.Alias, size)
	}
	s := n.Value
	if n.Tag == "!!int" {
		most := uint64(math.MaxUint64)
		if size < 8 {
			most = 1<<(8*size) - 1
		}
		u, err := strconv.ParseUint(s, 0, 64)
		if err != nil || u > most {
			return nil, fmt.Errorf("%s is not a whole number from 0 to %d", s, most)
		}
		b := make([]byte, max(size, 8))
		binary.LittleEndian.PutUint64(b, u)
		return b[:size], nil
	}
	b, err := hex.DecodeString(strings.TrimPrefix(strings.ReplaceAll(s, " ", ""), "0x"))
	if err != nil {
		return nil, fmt.Errorf("%q is neither an integer nor hex bytes", s)
	}
	if len(b) != size {
		return nil, fmt.Errorf("%d bytes, the map's are %d", len(b), size)
	}
	return b, nil
}

// SuiteFile is a user's YAML suite:
//
//	tests:
//	  - name: drop_udp           # optional, default user/<program>
//	    object: xdp_prog.o       # paths are relative to the suite file
//	    program: xdp_drop
//	    data: udp.bin            # optional
//	    ctx: ctx.bin             # optional
//	    map_init: maps.yaml      # optional
//	    want: 1                  # optional expected return value
type SuiteFile struct {
	Tests []struct {
		Name    string  `yaml:"name"`
		Object  string  `yaml:"object"`
		Program string  `yaml:"program"`
		Data    string  `yaml:"data"`
		Ctx     string  `yaml:"ctx"`
		MapInit string  `yaml:"map_init"`
		Want    *uint32 `yaml:"want"`
	} `yaml:"tests"`
}

// LoadSuiteFile reads a YAML suite and validates every test in it.
func LoadSuiteFile(path string) ([]Test, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sf SuiteFile
	if err := decodeYAML(path, b, &sf, ErrBadConfig); err != nil {
		return nil, err
	}
	if len(sf.Tests) == 0 {
		return nil, &FileError{Path: path, Msg: "no tests in it", Kind: ErrBadConfig}
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	var tests []Test
	seen := map[string]bool{}
	for i, t := range sf.Tests {
		if t.Object == "" || t.Program == "" {
			return nil, &FileError{Path: path, Msg: fmt.Sprintf("test %d needs object and program", i+1), Kind: ErrBadConfig}
		}
		test, err := ObjectTest(Object{Name: t.Name, Path: rel(t.Object), Program: t.Program,
			Data: rel(t.Data), Ctx: rel(t.Ctx), MapInit: rel(t.MapInit), Want: t.Want})
		if err != nil {
			return nil, fmt.Errorf("%s: test %d: %w", path, i+1, err)
		}
		if seen[test.Name] {
			return nil, &FileError{Path: path, Msg: fmt.Sprintf("two tests named %s", test.Name), Kind: ErrBadConfig}
		}
		seen[test.Name] = true
		tests = append(tests, test)
	}
	return tests, nil
}
