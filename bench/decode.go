package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// FileError is a mistake in a file the user gave bench (a suite, a
// map-init file, a saved report), said in one line that names the file,
// the line and the field in the file's own words: never Go's types, which
// yaml.v3 and encoding/json put in their messages. It matches Kind with
// errors.Is.
type FileError struct {
	Path  string // "" where the caller names the file
	Line  int    // 0 where unknown
	Field string // the key the mistake is under, "" for none
	Msg   string
	Kind  error // ErrBadConfig, ErrMapInit
}

func (e *FileError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Kind }

// decodeYAML decodes the YAML file path (its content b) into v, refusing
// fields v does not have. Every error is a *FileError of kind. An empty
// file leaves v as it is.
func decodeYAML(path string, b []byte, v any, kind error) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	fe := yamlError(b, reflect.TypeOf(v).Elem(), err)
	fe.Path, fe.Kind = path, kind
	return fe
}

// yamlLine is how yaml.v3 starts a message about one line.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlError says what is wrong with a YAML document b that failed to
// decode into t with err. yaml.v3's messages about the content name Go
// types ("field x not found in type struct { ... }", "cannot unmarshal
// !!str `abc` into int"), so the document is walked against t to find
// the first mistake and say it in words; its syntax errors are kept.
func yamlError(b []byte, t reflect.Type, err error) *FileError {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return lineError(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) == nil {
		if fe := checkYAML(&doc, t, "", map[*yaml.Node]bool{}); fe != nil {
			return fe
		}
	}
	// Not found by the walk: yaml's first message, less its Go types.
	msg := te.Errors[0]
	for _, cut := range []string{" not found in type ", " into "} {
		if i := strings.Index(msg, cut); i >= 0 {
			msg = msg[:i]
		}
	}
	return lineError(msg)
}

// lineError splits "line N: what" into a FileError.
func lineError(msg string) *FileError {
	msg, _, _ = strings.Cut(msg, "\n")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &FileError{Line: n, Msg: m[2]}
	}
	return &FileError{Msg: msg}
}

var yamlNodeType = reflect.TypeFor[yaml.Node]()

// checkYAML finds the first place where n does not fit t, the Go type it
// decodes into, as yaml.v3 with KnownFields would see it; field is the
// key n is under. Scalars are tried with yaml.v3 itself, so what it
// accepts is accepted here. Each alias is followed once.
func checkYAML(n *yaml.Node, t reflect.Type, field string, followed map[*yaml.Node]bool) *FileError {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return checkYAML(n.Content[0], t, field, followed)
	case yaml.AliasNode:
		if n.Alias == nil || followed[n.Alias] {
			return nil
		}
		followed[n.Alias] = true
		return checkYAML(n.Alias, t, field, followed)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == yamlNodeType || t.Kind() == reflect.Interface || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil
	}
	bad := func(want string) *FileError {
		return &FileError{Line: n.Line, Field: field, Msg: yamlValue(n) + " is not " + want}
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		names, types := yamlFields(t)
		if n.Kind != yaml.MappingNode {
			if t.Kind() == reflect.Struct {
				return bad("a mapping (fields: " + strings.Join(names, ", ") + ")")
			}
			return bad("a mapping")
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				if fe := checkYAML(v, t, field, followed); fe != nil {
					return fe
				}
				continue
			}
			if line, twice := seen[k.Value]; twice {
				return &FileError{Line: k.Line, Msg: fmt.Sprintf("%q is given twice (first on line %d)", k.Value, line)}
			}
			seen[k.Value] = k.Line
			var vt reflect.Type
			if t.Kind() == reflect.Struct {
				ft, ok := types[k.Value]
				if !ok {
					return &FileError{Line: k.Line, Msg: fmt.Sprintf("unknown field %q (known: %s)", k.Value, strings.Join(names, ", "))}
				}
				vt = ft
			} else {
				if fe := checkYAML(k, t.Key(), field, followed); fe != nil {
					return fe
				}
				vt = t.Elem()
			}
			if fe := checkYAML(v, vt, k.Value, followed); fe != nil {
				return fe
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return bad("a list")
		}
		for _, item := range n.Content {
			if fe := checkYAML(item, t.Elem(), field, followed); fe != nil {
				return fe
			}
		}
	default:
		if n.Kind != yaml.ScalarNode {
			return bad(valueWords(t))
		}
		if n.Decode(reflect.New(t).Interface()) != nil {
			return bad(valueWords(t))
		}
	}
	return nil
}

// yamlFields are the keys of struct t in yaml (in order) and their types.
func yamlFields(t reflect.Type) ([]string, map[string]reflect.Type) {
	if t.Kind() != reflect.Struct {
		return nil, nil
	}
	var names []string
	types := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = strings.ToLower(f.Name)
		}
		names = append(names, name)
		types[name] = f.Type
	}
	return names, types
}

// yamlValue is how a message quotes a value: text in quotes, a number as
// it is, a list or mapping by what it is.
func yamlValue(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.Tag {
	case "!!int", "!!float", "!!bool":
		return v
	}
	return strconv.Quote(v)
}

// valueWords is what a value of Go type t is, in a user's words.
func valueWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if t.Bits() == 64 {
			return "a whole number"
		}
		return fmt.Sprintf("a whole number from %d to %d", int64(-1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "text"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return "a single value"
}

// jsonError says what is wrong with JSON b that failed to decode with
// err, in the words of FileError; encoding/json's type errors name Go
// types ("cannot unmarshal string into Go struct field Report.results of
// type []bench.Result").
func jsonError(b []byte, err error) *FileError {
	line := func(offset int64) int {
		return 1 + bytes.Count(b[:min(max(offset, 0), int64(len(b)))], []byte("\n"))
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return &FileError{Line: line(se.Offset), Msg: se.Error()}
	case errors.As(err, &te):
		got := te.Value
		switch got {
		case "string":
			got = "text"
		case "array":
			got = "a list"
		case "object":
			got = "a mapping"
		case "bool":
			got = "true or false"
		case "number":
			got = "a number"
		default:
			got = strings.TrimPrefix(got, "number ")
		}
		// The path names an embedded struct by its Go name ("results.Test.
		// name"); the report's own keys are lower case.
		var path []string
		for p := range strings.SplitSeq(te.Field, ".") {
			if p != "" && !unicode.IsUpper(rune(p[0])) {
				path = append(path, p)
			}
		}
		return &FileError{Line: line(te.Offset), Field: strings.Join(path, "."), Msg: got + " is not " + valueWords(te.Type)}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &FileError{Msg: "the file ends before the JSON does"}
	}
	msg, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "json: "), "\n")
	return &FileError{Msg: msg}
}
