package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Fuzz targets for what users hand bench: suite files, map-init files,
// BPF objects and JSON reports. None may panic; each either loads or
// fails with one of the package's errors. `go test` runs the seeds and
// the committed corpus (testdata/fuzz); `make fuzz` searches further.

func writeFuzzFile(t *testing.T, name string, b []byte) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func FuzzSuiteFile(f *testing.F) {
	f.Add([]byte("tests:\n  - name: mine/lookup\n    object: m.o\n    program: hash_lookup\n    want: 1\n"))
	f.Add([]byte("tests:\n  - objekt: m.o\n"))
	f.Add([]byte("tests: [{object: m.o, program: p, data: d, ctx: c, map_init: i}]\n"))
	f.Add([]byte("tests: 7\n"))
	obj, err := os.ReadFile("maps_bpfel.o")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "m.o"), obj, 0o600); err != nil {
			t.Fatal(err)
		}
		suite := filepath.Join(dir, "suite.yaml")
		if err := os.WriteFile(suite, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadSuiteFile(suite)
		if err == nil {
			return
		}
		// One line, in the file's words, never Go's types.
		if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") || strings.Contains(msg, "struct {") || strings.Contains(msg, " into ") {
			t.Fatalf("not one line in the file's words: %q", msg)
		}
	})
}

func FuzzMapInit(f *testing.F) {
	f.Add([]byte("maps:\n  hash:\n    - key: 0\n      value: 42\n"))
	f.Add([]byte("maps:\n  array:\n    - {key: 0, value: 1}\n    - {key: 1, value: 2}\n"))
	f.Add([]byte("maps:\n  hash:\n    - {key: \"0102030405\", value: 1}\n"))
	f.Add([]byte("maps:\n  hash:\n    - {key: 4294967296, value: -1}\n"))
	f.Add([]byte("maps:\n  hash:\n    - {key: [1, 2], value: {a: b}}\n"))
	spec, err := loadMaps()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kvs, err := loadMapInit(writeFuzzFile(t, "init.yaml", b), spec)
		if err != nil {
			if !errors.Is(err, ErrMapInit) {
				t.Fatalf("not ErrMapInit: %v", err)
			}
			return
		}
		// What loads fits its map exactly.
		for name, entries := range kvs {
			ms := spec.Maps[name]
			for _, e := range entries {
				if len(e.k) != int(ms.KeySize) {
					t.Fatalf("map %s: key of %d bytes, the map's are %d", name, len(e.k), ms.KeySize)
				}
			}
		}
	})
}

func FuzzObjectFile(f *testing.F) {
	for _, name := range []string{"maps_bpfel.o", "baseline_bpfel.o"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("\x7fELF"))
	f.Add([]byte("not an object"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Reading the object is what a bad one reaches first; loading
		// into the kernel is the verifier's job, not fuzzed here.
		_, _ = loadObjectSpec(writeFuzzFile(t, "x.o", b))
	})
}

func FuzzReadJSON(f *testing.F) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, &Report{}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"results":[{"name":7}]}`))
	f.Add([]byte(`{"results":[{"name":"a","samples_ns":[1e308,-1]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := ReadJSON(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What reads writes back and reads again.
		var out bytes.Buffer
		if err := WriteJSON(&out, rep); err != nil {
			return // NaN and Inf do not encode: not a crash
		}
		if _, err := ReadJSON(&out); err != nil {
			t.Fatalf("a report written back does not read: %v", err)
		}
	})
}
