package collectors

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// loadWithMapAndBTF loads a GPL socket filter that references an array map
// and carries BTF func info, so map_ids and btf_id are non-empty.
func loadWithMapAndBTF(t *testing.T) (*ebpf.Program, *ebpf.Map) {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatalf("create map: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	name := uniqueName("meta")
	fn := &btf.Func{
		Name:    name,
		Type:    &btf.FuncProto{Return: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}},
		Linkage: btf.GlobalFunc,
	}
	insns := asm.Instructions{
		btf.WithFuncMetadata(asm.LoadMapPtr(asm.R1, m.FD()), fn),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.SocketFilter, License: "GPL", Instructions: insns,
	})
	if err != nil {
		t.Fatalf("load program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog, m
}

func TestReadMetaMatchesBpftool(t *testing.T) {
	privtest.Root(t)
	prog, m := loadWithMapAndBTF(t)
	id := progID(t, prog)

	got, err := ReadMeta(id)
	if err != nil {
		t.Fatalf("read meta: %v", err)
	}
	var want map[string]any
	bpftool(t, &want, "prog", "show", "id", itoa(id))
	// Our JSON names are bpftool's: compare field by field through JSON.
	var gotJSON map[string]any
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &gotJSON); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "type", "name", "tag", "gpl_compatible", "uid",
		"bytes_xlated", "bytes_jited", "bytes_memlock", "map_ids", "btf_id"} {
		if _, ok := want[k]; !ok {
			t.Errorf("bpftool prints no %q", k)
		}
		if !reflect.DeepEqual(gotJSON[k], want[k]) {
			t.Errorf("%s = %v, bpftool says %v", k, gotJSON[k], want[k])
		}
	}
	if !got.GPLCompatible || got.BytesJited == 0 || got.BytesMemlock == 0 {
		t.Errorf("ReadMeta reports a program unlike the one loaded: %+v", got)
	}

	mapInfo, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	mapID, _ := mapInfo.ID()
	if !slices.Equal(got.MapIDs, []uint32{uint32(mapID)}) {
		t.Errorf("map_ids = %v, want [%d]", got.MapIDs, mapID)
	}
	// bpftool 7.1 does not print verified_insns; cilium/ebpf reads it too.
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	if vi, ok := info.VerifiedInstructions(); !ok || got.VerifiedInsns != vi || vi == 0 {
		t.Errorf("verified_insns = %d, cilium/ebpf says %d (ok %v)", got.VerifiedInsns, vi, ok)
	}
	if got.BTFID == 0 {
		t.Error("btf_id = 0 for a program loaded with BTF")
	}
	if got.TypeID != uint32(ebpf.SocketFilter) {
		t.Errorf("type_id = %d, want %d", got.TypeID, ebpf.SocketFilter)
	}
	// bpftool prints whole seconds.
	loaded, _ := want["loaded_at"].(float64)
	if d := got.LoadedAt.Sub(time.Unix(int64(loaded), 0)); d < -10*time.Millisecond || d > time.Second+10*time.Millisecond {
		t.Errorf("loaded_at %v, bpftool says %v", got.LoadedAt, time.Unix(int64(loaded), 0))
	}
	if d := time.Since(got.LoadedAt); d < 0 || d > time.Minute {
		t.Errorf("loaded_at %v is %v from now", got.LoadedAt, d)
	}
}

func TestReadMetaGone(t *testing.T) {
	privtest.Root(t)
	prog, id := loadSocketFilter(t, "gone")
	prog.Close()
	_, err := ReadMeta(id)
	if !errors.Is(err, ErrGone) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadMeta of a closed program: %v, want ErrGone and os.ErrNotExist", err)
	}
}

func TestProgTypeName(t *testing.T) {
	for typ, want := range map[uint32]string{1: "socket_filter", 3: "sched_cls", 6: "xdp", 26: "tracing", 32: "netfilter", 33: "type_33"} {
		if got := ProgTypeName(typ); got != want {
			t.Errorf("ProgTypeName(%d) = %q, want %q", typ, got, want)
		}
	}
}
