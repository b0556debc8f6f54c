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

// TestOnlineFileReadsAgain: the kept fd sees the list as it is at each
// read, not as it was at the first (sysfs makes it anew at offset 0; a
// regular file rewritten in place shows the same).
func TestOnlineFileReadsAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "online")
	os.WriteFile(path, []byte("0-1\n"), 0o644)
	f := NewOnlineFile(path)
	defer f.Close()
	if got, err := f.CPUs(); err != nil || !reflect.DeepEqual(got, []int{0, 1}) {
		t.Fatalf("first read: %v, %v", got, err)
	}
	os.WriteFile(path, []byte("0-3\n"), 0o644)
	if got, err := f.CPUs(); err != nil || !reflect.DeepEqual(got, []int{0, 1, 2, 3}) {
		t.Fatalf("read after a CPU came online: %v, %v; want 0-3", got, err)
	}
	if _, err := NewOnlineFile(filepath.Join(t.TempDir(), "none")).Text(); err == nil {
		t.Error("no file: no error")
	}
}
