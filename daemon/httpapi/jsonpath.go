package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// typeMismatch finds where a JSON document does not fit Go type t and says
// so in the API's words: `results[0].name: want a string`. encoding/json's
// own error names Go types and drops array indices.
func typeMismatch(doc []byte, t reflect.Type) error {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return nil
	}
	return mismatchAt(v, t, "")
}

var timeType = reflect.TypeFor[time.Time]()

func mismatchAt(v any, t reflect.Type, path string) error {
	if v == nil {
		return nil // null leaves the zero value
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		if t == timeType {
			if _, ok := v.(string); !ok {
				return want(path, "a time as an RFC 3339 string")
			}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		if _, ok := v.(string); !ok {
			return want(path, "a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return want(path, "true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			return want(path, "a whole number")
		}
		if f := v.(float64); f < 0 && t.Kind() >= reflect.Uint {
			return want(path, "a number of at least 0")
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(float64); !ok {
			return want(path, "a number")
		}
	case reflect.Slice, reflect.Array:
		items, ok := v.([]any)
		if !ok {
			return want(path, "a list")
		}
		for i, item := range items {
			if err := mismatchAt(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		fields, ok := v.(map[string]any)
		if !ok {
			return want(path, "an object")
		}
		for k, item := range fields {
			if err := mismatchAt(item, t.Elem(), join(path, k)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		fields, ok := v.(map[string]any)
		if !ok {
			return want(path, "an object")
		}
		return structMismatch(fields, t, path)
	}
	return nil
}

// structMismatch checks an object's members against t's fields by their
// JSON names, embedded structs' fields included.
func structMismatch(fields map[string]any, t reflect.Type, path string) error {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			if err := structMismatch(fields, f.Type, path); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if v, ok := fields[name]; ok {
			if err := mismatchAt(v, f.Type, join(path, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func want(path, what string) error {
	if path == "" {
		path = "the document"
	}
	return fmt.Errorf("%s: want %s", path, what)
}
