package collectors

import "strconv"

// mapTypes are bpftool's names for enum bpf_map_type, indexed by value.
var mapTypes = [...]string{
	"unspec", "hash", "array", "prog_array", "perf_event_array",
	"percpu_hash", "percpu_array", "stack_trace", "cgroup_array", "lru_hash",
	"lru_percpu_hash", "lpm_trie", "array_of_maps", "hash_of_maps", "devmap",
	"sockmap", "cpumap", "xskmap", "sockhash", "cgroup_storage",
	"reuseport_sockarray", "percpu_cgroup_storage", "queue", "stack", "sk_storage",
	"devmap_hash", "struct_ops", "ringbuf", "inode_storage", "task_storage",
	"bloom_filter", "user_ringbuf", "cgrp_storage", "arena",
}

// MapTypeName returns bpftool's name for a kernel bpf_map_type, or "type_N"
// for one this build does not know.
func MapTypeName(t uint32) string {
	if int(t) < len(mapTypes) {
		return mapTypes[t]
	}
	return "type_" + strconv.FormatUint(uint64(t), 10)
}

// How a map's entries were counted (MapInfo.Counted).
const (
	// CountKernel is the kernel's own figure, bpf_map_sum_elem_count,
	// read for every map in one pass of MapIter.
	CountKernel = "kernel"
	// CountWalk is a walk of the keys with BPF_MAP_GET_NEXT_KEY, for map
	// types the kernel keeps no count of, within a budget of keys.
	CountWalk = "walk"
)

// fillCount says how entries of a map type are counted, with and without
// the iterator, or "" for types where a fill level means nothing (arrays
// are always full; rings, queues and storage maps have no fixed slots).
func fillCount(typ uint32, haveIter bool) string {
	switch MapTypeName(typ) {
	case "hash", "percpu_hash", "lru_hash", "lru_percpu_hash", "hash_of_maps":
		if haveIter {
			return CountKernel
		}
		return CountWalk
	case "lpm_trie":
		return CountWalk
	}
	return ""
}
