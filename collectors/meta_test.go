package collectors

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// bpftoolProg is the part of `bpftool prog show -j` that Meta mirrors.
type bpftoolProg struct {
	ID            uint32   `json:"id"`
	Type          string   `json:"type"`
	Name          string   `json:"name"`
	Tag           string   `json:"tag"`
	GPLCompatible bool     `json:"gpl_compatible"`
	LoadedAt      int64    `json:"loaded_at"`
	UID           uint32   `json:"uid"`
	BytesXlated   uint32   `json:"bytes_xlated"`
	BytesJited    uint32   `json:"bytes_jited"`
	BytesMemlock  uint64   `json:"bytes_memlock"`
	MapIDs        []uint32 `json:"map_ids"`
	BTFID         uint32   `json:"btf_id"`
}

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
	var want bpftoolProg
	bpftool(t, &want, "prog", "show", "id", itoa(id))

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
	gotAsBpftool := bpftoolProg{
		ID: got.ID, Type: got.Type, Name: got.Name, Tag: got.Tag,
		GPLCompatible: got.GPLCompatible, LoadedAt: want.LoadedAt, UID: got.UID,
		BytesXlated: got.BytesXlated, BytesJited: got.BytesJited, BytesMemlock: got.BytesMemlock,
		MapIDs: got.MapIDs, BTFID: got.BTFID,
	}
	if !equalJSON(t, gotAsBpftool, want) {
		t.Errorf("ReadMeta = %+v\nbpftool  = %+v", gotAsBpftool, want)
	}
	if !want.GPLCompatible || want.BytesJited == 0 {
		t.Errorf("bpftool reports a program unlike the one loaded: %+v", want)
	}
	// bpftool prints whole seconds.
	if d := got.LoadedAt.Sub(time.Unix(want.LoadedAt, 0)); d < -10*time.Millisecond || d > time.Second+10*time.Millisecond {
		t.Errorf("loaded_at %v, bpftool says %v", got.LoadedAt, time.Unix(want.LoadedAt, 0))
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
