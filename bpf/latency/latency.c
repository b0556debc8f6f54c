//go:build ignore

// Per-run latency of one target BPF program: an fentry and an fexit program
// attached to the target take the clock at its entry and exit and add the
// difference to a per-CPU log-linear histogram. Go points both programs at
// the target (AttachTarget/AttachTo) at load time, attaches fexit before
// fentry and detaches fentry first, so that an exit never looks for an
// entry that was not taken (it finds depth 0 and counts the run untimed).
//
// The buckets are internal/loglinear's: values below 32 ns have a bucket of
// their own; above, each power of two is cut into 32 equal buckets, up to
// 2^36 ns (68 s), beyond which everything lands in the last one.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define SUB_BITS 5
#define SUB_COUNT (1 << SUB_BITS)
#define BUCKETS 1024
#define MAX_EXP 35
// Runs of the target nested on one CPU (an interrupt's run inside a
// task's): deeper ones are counted untimed.
#define MAX_DEPTH 4

// One CPU's state and totals: one map value, so each side of a run looks
// up one element.
struct latency {
	__u64 depth;
	__u64 start[MAX_DEPTH];
	__u64 entries; // runs the fentry program saw
	__u64 timed;   // runs whose time went into the histogram
	__u64 untimed; // exits without their entry, or nested too deep
	__u64 sum_ns;
	__u64 max_ns;
	__u64 counts[BUCKETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct latency);
} latency SEC(".maps");

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline __u32 bucket(__u64 ns)
{
	__u32 e;

	if (ns < SUB_COUNT)
		return ns;
	e = log2_u64(ns);
	if (e > MAX_EXP)
		return BUCKETS - 1;
	return (e - SUB_BITS + 1) * SUB_COUNT + ((ns >> (e - SUB_BITS)) & (SUB_COUNT - 1));
}

SEC("fentry/target")
int BPF_PROG(latency_entry)
{
	__u32 key = 0;
	struct latency *l = bpf_map_lookup_elem(&latency, &key);
	__u64 d;

	if (!l)
		return 0;
	l->entries++;
	d = l->depth++;
	if (d >= MAX_DEPTH)
		return 0;
	// The mask keeps the verifier sure of the bound the compiler dropped.
	barrier_var(d);
	// The clock last, so that the bookkeeping falls outside the run.
	l->start[d & (MAX_DEPTH - 1)] = bpf_ktime_get_ns();
	return 0;
}

SEC("fexit/target")
int BPF_PROG(latency_exit)
{
	// The clock first, for the same reason.
	__u64 now = bpf_ktime_get_ns(), ns, d;
	__u32 key = 0, b;
	struct latency *l = bpf_map_lookup_elem(&latency, &key);

	if (!l)
		return 0;
	if (l->depth == 0) {
		l->untimed++;
		return 0;
	}
	d = --l->depth;
	if (d >= MAX_DEPTH) {
		l->untimed++;
		return 0;
	}
	barrier_var(d);
	ns = now - l->start[d & (MAX_DEPTH - 1)];
	l->timed++;
	l->sum_ns += ns;
	if (ns > l->max_ns)
		l->max_ns = ns;
	b = bucket(ns);
	barrier_var(b);
	l->counts[b & (BUCKETS - 1)]++;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
