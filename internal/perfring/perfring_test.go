package perfring

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestOnlineCPUs(t *testing.T) {
	for in, want := range map[string][]int{
		"0\n":         {0},
		"0-3\n":       {0, 1, 2, 3},
		"0-1,4,6-7\n": {0, 1, 4, 6, 7},
	} {
		dir := t.TempDir()
		p := filepath.Join(dir, "devices/system/cpu")
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "online"), []byte(in), 0o644)
		got, err := OnlineCPUs(dir)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("OnlineCPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := OnlineCPUs(t.TempDir()); err == nil {
		t.Error("onlineCPUs without the file: no error")
	}
}
