//go:build ignore

// Per-run latency of one target BPF program: an fentry and an fexit program
// attached to the target take the clock at its entry and exit and add the
// difference to a per-CPU log-linear histogram. Go points both programs at
// the target (AttachTarget/AttachTo) at load time, attaches fexit before
// fentry and detaches fentry first, so that an exit never looks for an
// entry that was not taken (it finds depth 0 and counts the run untimed).
//
// Beside the time, each run can count one perf event (cycles, where the
// CPU has a PMU): Go opens it on every CPU, puts it in `event` and sets
// with_event. Its readings wrap the clock's (taken before the clock at
// entry and after it at exit), so the time stays the inner interval; the
// calibration measures what each adds to the other.
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
	// The event's reading at each depth's entry, with its enabled and
	// running times: a run is counted only if the event was on the PMU
	// all through it (see add_event). ev_start 0: no reading taken.
	__u64 ev_start[MAX_DEPTH];
	__u64 ev_enabled[MAX_DEPTH];
	__u64 ev_running[MAX_DEPTH];
	__u64 ev_counted; // runs whose count went into ev_counts
	__u64 ev_missed;  // timed runs the event could not count
	__u64 ev_sum;
	__u64 ev_max;
	__u64 ev_counts[BUCKETS];
};

const volatile __u32 with_event = 0;

// The event's per-CPU perf fds, filled from Go (index: the CPU).
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} event SEC(".maps");

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

// add_event puts one run's count of the event in the histogram, if both
// its readings were taken and the event counted all through the run: its
// running time moved, and by as much as its enabled time. An event the
// kernel multiplexed off the PMU (more events than counters) keeps its
// enabled time moving while running stands still and its counter with
// it, so the enabled time alone would count such a run as 0, or as the
// part of it the event was on the PMU; an event not scheduled on this
// CPU at all has both standing still. Such runs are missed, not counted
// low.
static __always_inline void add_event(struct latency *l, __u64 d, struct bpf_perf_event_value *end, long err)
{
	__u64 start = l->ev_start[d & (MAX_DEPTH - 1)], n;
	__u64 running = end->running - l->ev_running[d & (MAX_DEPTH - 1)];
	__u64 enabled = end->enabled - l->ev_enabled[d & (MAX_DEPTH - 1)];
	__u32 b;

	if (err || !start || !running || running != enabled) {
		l->ev_missed++;
		return;
	}
	n = end->counter - (start - 1);
	l->ev_counted++;
	l->ev_sum += n;
	if (n > l->ev_max)
		l->ev_max = n;
	b = bucket(n);
	barrier_var(b);
	l->ev_counts[b & (BUCKETS - 1)]++;
}

SEC("fentry/target")
int BPF_PROG(latency_entry)
{
	__u32 key = 0;
	struct latency *l = bpf_map_lookup_elem(&latency, &key);
	struct bpf_perf_event_value v;
	__u64 d;

	if (!l)
		return 0;
	l->entries++;
	d = l->depth++;
	if (d >= MAX_DEPTH)
		return 0;
	// The mask keeps the verifier sure of the bound the compiler dropped.
	barrier_var(d);
	if (with_event) {
		// Kept plus one, so that 0 says the reading failed.
		if (bpf_perf_event_read_value(&event, BPF_F_CURRENT_CPU, &v, sizeof(v)) == 0) {
			l->ev_start[d & (MAX_DEPTH - 1)] = v.counter + 1;
			l->ev_enabled[d & (MAX_DEPTH - 1)] = v.enabled;
			l->ev_running[d & (MAX_DEPTH - 1)] = v.running;
		} else {
			l->ev_start[d & (MAX_DEPTH - 1)] = 0;
		}
	}
	// The clock last, so that the bookkeeping falls outside the run.
	l->start[d & (MAX_DEPTH - 1)] = bpf_ktime_get_ns();
	return 0;
}

SEC("fexit/target")
int BPF_PROG(latency_exit)
{
	// The clock first, for the same reason, then the event.
	__u64 now = bpf_ktime_get_ns(), ns, d;
	struct bpf_perf_event_value v = {};
	long err = with_event ? bpf_perf_event_read_value(&event, BPF_F_CURRENT_CPU, &v, sizeof(v)) : 0;
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
	if (with_event)
		add_event(l, d, &v, err);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
