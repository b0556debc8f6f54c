package collectors

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// A program the kernel refuses to open (as a security module may) is
// skipped; the sweep still reads all the others and says what it skipped.
func TestSweepSkipsARefusedProgram(t *testing.T) {
	privtest.Root(t)
	var ids []uint32
	for i := range 3 {
		p, err := privtest.LoadSocketFilter(fmt.Sprintf("skip_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		info, _ := p.Info()
		id, _ := info.ID()
		ids = append(ids, uint32(id))
	}
	refused := ids[1]
	openProgram = func(cmd uintptr, id uint32) (int, error) {
		if id == refused {
			return -1, wrapErrno("get fd by id", unix.EACCES)
		}
		return fdByID(cmd, id)
	}
	defer func() { openProgram = fdByID }()

	samples, err := Sweep(nil)
	var skipped *SkippedError
	if !errors.As(err, &skipped) || skipped.Skipped != 1 || !errors.Is(err, unix.EACCES) {
		t.Fatalf("sweep error = %v, want one program skipped with EACCES", err)
	}
	seen := map[uint32]bool{}
	for _, s := range samples {
		seen[s.ID] = true
	}
	if !seen[ids[0]] || !seen[ids[2]] || seen[refused] {
		t.Errorf("sweep saw %v of %v (refused %d)", seen, ids, refused)
	}
}
