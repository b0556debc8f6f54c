//go:build ignore

// Map fill levels in one read: a BPF iterator over every map
// (iter/bpf_map) writes each map's id and the kernel's own element count,
// bpf_map_sum_elem_count (the per-CPU counters hash maps keep as they
// insert and delete, summed). No map is opened and no key is read.
//
// The kernel keeps that count for the hash family (hash, per-CPU hash, LRU
// hash, LRU per-CPU hash, hash of maps); for other types it is 0 and the
// Go side says so. Needs Linux 6.6 (bpf_map_sum_elem_count) and kernel BTF.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_map {
	__u32 id;
} __attribute__((preserve_access_index));

struct bpf_iter__bpf_map {
	struct bpf_iter_meta *meta;
	struct bpf_map *map;
} __attribute__((preserve_access_index));

extern __s64 bpf_map_sum_elem_count(const struct bpf_map *map) __ksym;

// What the iterator writes per map: 16 bytes, little-endian on the targets
// bpf2go builds for. Go reads it in mapiter.go.
struct record {
	__u32 id;
	__u32 pad;
	__s64 entries;
};

SEC("iter/bpf_map")
int bpfperf_maps(struct bpf_iter__bpf_map *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct bpf_map *map = ctx->map;
	struct record r = {};

	if (!map)
		return 0; // the end of the walk
	r.id = map->id;
	r.entries = bpf_map_sum_elem_count(map);
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
