package bench

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goWords are what a user must never read in a message about their file:
// Go's types, yaml's tags, Go's field names.
var goWords = regexp.MustCompile(`struct \{|\b(u?int(8|16|32|64)?|float(32|64)|string|bool|interface)\b|\[\]|map\[|bench\.|yaml\.v|(json|yaml):\\?"|Go struct|!!|Test\.`)

// checkFileError asserts err is the one-line message want, matches kind,
// and names no Go type.
func checkFileError(t *testing.T, what string, err error, dir, want string, kind error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %q", what, want)
		return
	}
	got := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
	if got != want {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
	if strings.Contains(got, "\n") || goWords.MatchString(got) {
		t.Errorf("%s: %q is not one line in the file's words", what, got)
	}
	if !errors.Is(err, kind) {
		t.Errorf("%s: %v does not match %v", what, err, kind)
	}
}

// TestSuiteFileErrors: each mistake in a suite file is one line naming
// the file, the line and the field, with the fields there are where one
// is unknown, and no Go type.
func TestSuiteFileErrors(t *testing.T) {
	dir := t.TempDir()
	obj, err := os.ReadFile("maps_bpfel.o")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "m.o"), obj, 0o600)
	const head = "tests:\n  - object: m.o\n    program: hash_lookup\n"
	for _, c := range []struct{ body, want string }{
		{head + "    repeat: 5\n", `suite.yaml: line 4: unknown field "repeat" (known: name, object, program, data, ctx, map_init, want)`},
		{"test:\n  - object: m.o\n", `suite.yaml: line 1: unknown field "test" (known: tests)`},
		{"tests:\n  - <<: {object: m.o, nope: 1}\n", `suite.yaml: line 2: unknown field "nope" (known: name, object, program, data, ctx, map_init, want)`},
		{head + "    want: abc\n", `suite.yaml: line 4: field "want": "abc" is not a whole number from 0 to 4294967295`},
		{head + "    want: -1\n", `suite.yaml: line 4: field "want": -1 is not a whole number from 0 to 4294967295`},
		{head + "    want: 4294967296\n", `suite.yaml: line 4: field "want": 4294967296 is not a whole number from 0 to 4294967295`},
		{head + "    want: [1]\n", `suite.yaml: line 4: field "want": a list is not a whole number from 0 to 4294967295`},
		{"tests:\n  - object: [m.o]\n", `suite.yaml: line 2: field "object": a list is not text`},
		{"tests: 7\n", `suite.yaml: line 1: field "tests": 7 is not a list`},
		{"tests:\n  object: m.o\n", `suite.yaml: line 2: field "tests": a mapping is not a list`},
		{"tests:\n  - m.o\n", `suite.yaml: line 2: field "tests": "m.o" is not a mapping (fields: name, object, program, data, ctx, map_init, want)`},
		{"hello\n", `suite.yaml: line 1: "hello" is not a mapping (fields: tests)`},
		{head + "    program: other\n", `suite.yaml: line 4: "program" is given twice (first on line 3)`},
		{"tests:\n  - object: m.o\n   program: x\n", `suite.yaml: line 1: did not find expected '-' indicator`},
		{"", `suite.yaml: no tests in it`},
		{"tests:\n  - name: x\n", `suite.yaml: test 1 needs object and program`},
		{head + head[len("tests:\n"):], `suite.yaml: two tests named user/hash_lookup`},
	} {
		p := filepath.Join(dir, "suite.yaml")
		if err := os.WriteFile(p, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadSuiteFile(p)
		checkFileError(t, strings.ReplaceAll(c.body, "\n", `\n`), err, dir, c.want, ErrBadConfig)
	}
}

// TestMapInitErrors: the same for map-init files, whose entries' own
// mistakes name the line, the field, the map and the entry.
func TestMapInitErrors(t *testing.T) {
	spec, err := loadMaps()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct{ body, want string }{
		{"mpas:\n  hash:\n    - {key: 0, value: 1}\n", `init.yaml: line 1: unknown field "mpas" (known: maps)`},
		{"maps:\n  hash:\n    - key: 0\n      val: 42\n", `init.yaml: line 4: unknown field "val" (known: key, value)`},
		{"maps:\n  hash: 7\n", `init.yaml: line 2: field "hash": 7 is not a list`},
		{"maps: [1]\n", `init.yaml: line 1: field "maps": a list is not a mapping`},
		{"maps:\n  hash:\n    - {key: -1, value: 1}\n", `init.yaml: line 3: field "key": -1 is not a whole number from 0 to 4294967295 (map hash, entry 1)`},
		{"maps:\n  array:\n    - {key: 0, value: 1}\n  hash:\n    - {key: zz, value: 1}\n", `init.yaml: line 5: field "key": "zz" is neither an integer nor hex bytes (map hash, entry 1)`},
		{"maps:\n  hash:\n    - {key: 1, value: 1}\n    - {key: 2, value: 1}\n", `init.yaml: map hash holds 1 entries, map-init has 2`},
		{"maps:\n  hash:\n    - {key: 1, value: [1]}\n", `init.yaml: line 3: field "value": want an integer or hex bytes, not a list or mapping (map hash, entry 1)`},
		{"maps:\n  hash:\n    - {value: 1}\n", `init.yaml: line 3: field "key": missing (map hash, entry 1)`},
		{"maps:\n  nosuch:\n    - {key: 0, value: 1}\n", `init.yaml: no map "nosuch" in the object (it has: .bss, array, array_of_maps, hash, hash_of_maps, lpm_trie, lru_hash, lru_percpu_hash, percpu_array, percpu_hash)`},
	} {
		p := filepath.Join(dir, "init.yaml")
		if err := os.WriteFile(p, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadMapInit(p, spec)
		checkFileError(t, strings.ReplaceAll(c.body, "\n", `\n`), err, dir, c.want, ErrMapInit)
	}
}

// TestReportFileErrors: a JSON report that does not decode is one line
// with its line and field (the caller puts the file's name in front).
func TestReportFileErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"results":[{"name":7}]}`, `line 1: field "results.name": a number is not text`},
		{"{\n \"results\": 7\n}", `line 2: field "results": a number is not a list`},
		{"{\n \"config\": {\"repeat\": \"abc\"}\n}", `line 2: field "config.repeat": text is not a whole number`},
		{"{\n\"macro\": {\"runs\": 1.5}}", `line 2: field "macro.runs": 1.5 is not a whole number`},
		{"not a report", `line 1: invalid character 'o' in literal null (expecting 'u')`},
		{`{"results": [`, `the file ends before the JSON does`},
	} {
		_, err := ReadJSON(strings.NewReader(c.body))
		checkFileError(t, c.body, err, "", c.want, ErrBadConfig)
	}
}
