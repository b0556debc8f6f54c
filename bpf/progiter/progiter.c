//go:build ignore

// The iterator sweep: one BPF iterator over every loaded program
// (iter/bpf_prog) writes a fixed-size binary record per program, so one
// read() of the iterator gives every program's cumulative run-time stats
// without opening any of them.
//
// The kernel keeps a program's stats per CPU (prog->stats, a __percpu
// pointer that the kernel's BTF does not tag as per-CPU, so bpf_per_cpu_ptr
// refuses it). The program derives each CPU's per-CPU offset itself:
// bpf_map_lookup_percpu_elem on the one-slot per-CPU array `pcpu` gives the
// slot's address on CPU n, that array's own __percpu base (bpf_array.pptrs[0])
// subtracted from it is CPU n's offset, and prog->stats plus that offset is
// CPU n's struct bpf_prog_stats. Summed over the possible CPUs as
// bpf_prog_get_stats does. Needs Linux 5.19 (bpf_map_lookup_percpu_elem)
// and kernel BTF.
//
// Kernel structs are declared here with only the fields read, marked
// preserve_access_index, so every offset is a CO-RE relocation against the
// running kernel's BTF and no vmlinux.h is needed.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_prog_aux {
	__u32 id;
	char name[16];
	__u64 load_time;
} __attribute__((preserve_access_index));

// The kernel's counters are u64_stats_t, a struct on every arch; a local
// struct matches any struct under CO-RE.
struct bpf_prog_stats {
	struct { __u64 v; } cnt;
	struct { __u64 v; } nsecs;
	struct { __u64 v; } misses;
} __attribute__((preserve_access_index));

struct bpf_prog {
	enum bpf_prog_type type;
	__u8 tag[8];
	struct bpf_prog_aux *aux;
	struct bpf_prog_stats *stats; // __percpu
} __attribute__((preserve_access_index));

struct bpf_iter__bpf_prog {
	struct bpf_iter_meta *meta;
	struct bpf_prog *prog;
} __attribute__((preserve_access_index));

struct bpf_array {
	void *pptrs[0]; // __percpu, in an anonymous union after struct bpf_map
} __attribute__((preserve_access_index));

// What the iterator writes per program: 64 bytes, little-endian on the
// targets bpf2go builds for. Go reads it as progiterRecord.
struct record {
	__u32 id;
	__u32 type;
	__u8 tag[8];
	char name[16];
	__u64 load_time; // ns since boot (CLOCK_BOOTTIME), as bpf_prog_info's
	__u64 run_cnt;
	__u64 run_time_ns;
	__u64 recursion_misses;
};

// Possible CPUs (ebpf.PossibleCPU), set by Go before loading.
const volatile __u32 nr_cpus = 1;

// One slot whose addresses on each CPU give the per-CPU offsets.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} pcpu SEC(".maps");

// as_scalar returns a pointer's value as a plain number. The verifier
// refuses arithmetic on map pointers, and a pointer into a map value
// minus an unknown scalar stays a pointer it will not let us add to
// another address; a copy through bpf_probe_read_kernel is a scalar.
static __always_inline __u64 as_scalar(const void *p)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &p);
	return v;
}

struct sum {
	__u64 stats; // prog->stats, a __percpu address
	__u64 base;  // pcpu's __percpu base, bpf_array.pptrs[0]
	__u64 cnt, nsecs, misses;
};

static long add_cpu(__u64 cpu, void *data)
{
	struct sum *s = data;
	__u32 zero = 0;
	__u64 at, v;
	void *slot;

	slot = bpf_map_lookup_percpu_elem(&pcpu, &zero, cpu);
	if (!slot)
		return 1; // cpu >= nr_cpu_ids: no more CPUs
	at = s->stats + (as_scalar(slot) - s->base);
	v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), (void *)(at + bpf_core_field_offset(struct bpf_prog_stats, cnt)));
	s->cnt += v;
	v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), (void *)(at + bpf_core_field_offset(struct bpf_prog_stats, nsecs)));
	s->nsecs += v;
	v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), (void *)(at + bpf_core_field_offset(struct bpf_prog_stats, misses)));
	s->misses += v;
	return 0;
}

SEC("iter/bpf_prog")
int bpfperf_progs(struct bpf_iter__bpf_prog *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct bpf_prog *prog = ctx->prog;
	struct record r = {};
	struct sum s = {};
	struct bpf_prog_aux *aux;
	__u64 arr;

	if (!prog)
		return 0; // the end of the walk
	aux = BPF_CORE_READ(prog, aux);
	r.id = BPF_CORE_READ(aux, id);
	r.type = BPF_CORE_READ(prog, type);
	r.load_time = BPF_CORE_READ(aux, load_time);
	BPF_CORE_READ_INTO(&r.tag, prog, tag);
	BPF_CORE_READ_INTO(&r.name, aux, name);

	s.stats = (__u64)BPF_CORE_READ(prog, stats);
	arr = as_scalar(&pcpu);
	bpf_probe_read_kernel(&s.base, sizeof(s.base), (void *)(arr + bpf_core_field_offset(struct bpf_array, pptrs)));
	// bpf_loop verifies add_cpu once, so any CPU count loads; it stops at
	// nr_cpus (at most 1 << 23, the kernel's bpf_loop limit) or at the
	// first CPU the map does not have.
	if (s.stats && s.base)
		bpf_loop(nr_cpus, add_cpu, &s, 0);
	r.run_cnt = s.cnt;
	r.run_time_ns = s.nsecs;
	r.recursion_misses = s.misses;
	bpf_seq_write(seq, &r, sizeof(r));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
