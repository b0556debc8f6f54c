package collectors

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Meta is everything about one program instance that does not change while
// it is loaded, read once when its id first appears. JSON names follow
// bpftool's `prog show -j` where bpftool has the field.
type Meta struct {
	ID     uint32 `json:"id"`
	Type   string `json:"type"` // bpftool's name, "type_N" if unknown
	TypeID uint32 `json:"type_id"`
	// Name is the full name, as bpftool prints it: where the kernel cut
	// it to 15 characters, the BTF name of the program's entry function.
	Name string `json:"name"`
	// KernelName is the name the kernel keeps (at most 15 characters).
	KernelName    string        `json:"kernel_name"`
	Tag           string        `json:"tag"` // 16 hex chars
	GPLCompatible bool          `json:"gpl_compatible"`
	LoadedAt      time.Time     `json:"loaded_at"`
	UID           uint32        `json:"uid"`
	BytesXlated   uint32        `json:"bytes_xlated"`
	BytesJited    uint32        `json:"bytes_jited"`
	BytesMemlock  uint64        `json:"bytes_memlock"`
	MapIDs        []uint32      `json:"map_ids"`
	BTFID         uint32        `json:"btf_id"`
	VerifiedInsns uint32        `json:"verified_insns"`
	Attach        []AttachPoint `json:"attach,omitempty"` // filled by the caller from Links()
	Owners        []Owner       `json:"pids,omitempty"`   // filled by the caller from Owners()
	// Pin is a bpffs path that keeps it loaded, whoever else holds it
	// (filled by the caller from ScanPins); "" for none.
	Pin string `json:"pin,omitempty"`
	// Loader is the process that loaded it, from the kernel's load record
	// (filled by the caller); nil where it was loaded before the daemon
	// started or its record was lost.
	Loader *Loader `json:"loader,omitempty"`
}

// Loader is the process that made a program's BPF_PROG_LOAD, as it was
// then: it may have exited since.
type Loader struct {
	PID  int    `json:"pid"`
	TID  int    `json:"tid,omitempty"`
	Comm string `json:"comm,omitempty"`
	// Cgroup is its cgroup v2 path, and Unit and Container what that path
	// names (UnitAndContainer).
	Cgroup    string `json:"cgroup,omitempty"`
	CgroupID  uint64 `json:"cgroup_id,omitempty"`
	Unit      string `json:"unit,omitempty"`
	Container string `json:"container,omitempty"`
	// Pod is the container's pod by name, where the CRI socket lists it;
	// nil elsewhere (no Kubernetes, a plain runtime, a socket that is
	// down: Container still names it by ids).
	Pod *Pod      `json:"k8s,omitempty"`
	At  time.Time `json:"at"`
	// Source says how the command and cgroup were found.
	Source string `json:"source,omitempty"`
}

// progTypes are bpftool's names for enum bpf_prog_type, indexed by value.
var progTypes = [...]string{
	"unspec", "socket_filter", "kprobe", "sched_cls", "sched_act",
	"tracepoint", "xdp", "perf_event", "cgroup_skb", "cgroup_sock",
	"lwt_in", "lwt_out", "lwt_xmit", "sock_ops", "sk_skb",
	"cgroup_device", "sk_msg", "raw_tracepoint", "cgroup_sock_addr", "lwt_seg6local",
	"lirc_mode2", "sk_reuseport", "flow_dissector", "cgroup_sysctl", "raw_tracepoint_writable",
	"cgroup_sockopt", "tracing", "struct_ops", "ext", "lsm",
	"sk_lookup", "syscall", "netfilter",
}

// ProgTypeName returns bpftool's name for a kernel bpf_prog_type, or
// "type_N" for one this build does not know.
func ProgTypeName(t uint32) string {
	if int(t) < len(progTypes) {
		return progTypes[t]
	}
	return "type_" + strconv.FormatUint(uint64(t), 10)
}

// maxUsedMaps is the kernel's MAX_USED_MAPS; one buffer this size gets every
// map id in a single info call.
const maxUsedMaps = 64

// ReadMeta opens program id, reads its full info and memlock, and closes it.
// It returns an error matching ErrGone (and os.ErrNotExist) if the program
// is gone. It costs a few info calls: call it when an id first appears.
func ReadMeta(id uint32) (Meta, error) {
	fd, err := fdByID(unix.BPF_PROG_GET_FD_BY_ID, id)
	if err != nil {
		return Meta{}, fmt.Errorf("read meta: %w", err)
	}
	defer closeFD(fd)

	var info progInfo
	mapIDs := make([]uint32, maxUsedMaps)
	for {
		info = progInfo{nrMapIDs: uint32(len(mapIDs)), mapIDs: unsafe.Pointer(&mapIDs[0])}
		if err := objInfo(fd, unsafe.Pointer(&info), uint32(unsafe.Sizeof(info))); err != nil {
			return Meta{}, fmt.Errorf("read meta of program %d: %w", id, err)
		}
		if int(info.nrMapIDs) <= len(mapIDs) {
			break
		}
		mapIDs = make([]uint32, info.nrMapIDs)
	}
	memlock, err := fdinfoUint(fmt.Sprintf("/proc/self/fdinfo/%d", fd), "memlock:")
	if err != nil {
		return Meta{}, fmt.Errorf("read meta of program %d: %w", id, err)
	}
	boot, err := bootTime()
	if err != nil {
		return Meta{}, err
	}
	kernelName := cString(info.name[:])
	return Meta{
		ID:            info.id,
		Type:          ProgTypeName(info.typ),
		TypeID:        info.typ,
		Name:          fullName(fd, kernelName, info.btfID, info.nrFuncInfo),
		KernelName:    kernelName,
		Tag:           hex.EncodeToString(info.tag[:]),
		GPLCompatible: info.flags&1 != 0,
		LoadedAt:      boot.Add(time.Duration(info.loadTime)),
		UID:           info.createdByUID,
		BytesXlated:   info.xlatedProgLen,
		BytesJited:    info.jitedProgLen,
		BytesMemlock:  memlock,
		MapIDs:        mapIDs[:info.nrMapIDs:info.nrMapIDs],
		BTFID:         info.btfID,
		VerifiedInsns: info.verifiedInsns,
	}, nil
}

// bootTime is the wall-clock time of boot, the origin of load_time.
func bootTime() (time.Time, error) {
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Time{}, fmt.Errorf("read CLOCK_BOOTTIME: %w", err)
	}
	return now.Add(-time.Duration(ts.Nano())), nil
}

// fdinfoUint reads the number after key (e.g. "prog_id:") in an fdinfo file.
func fdinfoUint(path, key string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %q line", path, key)
}
