//go:build ignore

// Exact per-program perf counters, the way `bpftool prog profile` and
// `perf stat -b` count: an fentry and an fexit program attached to one
// target BPF program read the same per-CPU perf counters at the target's
// entry and exit and add the difference to per-CPU totals. Each event costs
// exactly two counter reads per target run: one at entry, one at exit.
//
// Go sets num_events before loading, fills one perf event array per event
// (index = cpu), and points both programs at the target
// (AttachTarget/AttachTo) at load time. One array per event, not one of
// num_cpus * num_events: the loader (cilium/ebpf) clamps a perf event
// array to the possible CPUs, which left every event past the first
// without its counters.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

// Per-event work is written out for each of MAX_EVENTS: 6.1's verifier
// rejects the loop clang 14 makes of it ("infinite loop detected").
#define MAX_EVENTS 4

const volatile __u32 num_events = 1;

// Per-CPU perf event fds of each event, filled from Go.
#define EVENTS_MAP(name)                                   \
	struct {                                           \
		__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY); \
		__uint(key_size, sizeof(__u32));           \
		__uint(value_size, sizeof(__u32));         \
	} name SEC(".maps")
EVENTS_MAP(events0);
EVENTS_MAP(events1);
EVENTS_MAP(events2);
EVENTS_MAP(events3);

// read_event reads event i on cpu; i is a constant where it is inlined,
// so each call names its own map.
static __always_inline long read_event(__u32 i, __u32 cpu, struct bpf_perf_event_value *v)
{
	switch (i) {
	case 0:
		return bpf_perf_event_read_value(&events0, cpu, v, sizeof(*v));
	case 1:
		return bpf_perf_event_read_value(&events1, cpu, v, sizeof(*v));
	case 2:
		return bpf_perf_event_read_value(&events2, cpu, v, sizeof(*v));
	case 3:
		return bpf_perf_event_read_value(&events3, cpu, v, sizeof(*v));
	}
	return -1;
}

// The readings taken at entry, per CPU and event. enabled == 0 marks a
// reading that failed, so the exit side skips it.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_EVENTS);
	__type(key, __u32);
	__type(value, struct bpf_perf_event_value);
} entry_readings SEC(".maps");

// Accumulated exit - entry differences, per CPU and event.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_EVENTS);
	__type(key, __u32);
	__type(value, struct bpf_perf_event_value);
} totals SEC(".maps");

// Runs seen, per CPU: key 0 counts entries, key 1 exits, key 2 runs whose
// first event's difference went into totals.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} runs SEC(".maps");

static __always_inline void count_run(__u32 key)
{
	__u64 *n = bpf_map_lookup_elem(&runs, &key);

	if (n)
		*n += 1;
}

static __always_inline void read_entry(__u32 i, __u32 cpu)
{
	struct bpf_perf_event_value *v;

	if (i >= num_events)
		return;
	v = bpf_map_lookup_elem(&entry_readings, &i);
	if (v && read_event(i, cpu, v))
		v->enabled = 0;
}

static __always_inline long read_now(__u32 i, __u32 cpu, struct bpf_perf_event_value *now)
{
	if (i >= num_events)
		return -1;
	return read_event(i, cpu, now);
}

static __always_inline void accumulate(__u32 i, long err, struct bpf_perf_event_value *now)
{
	struct bpf_perf_event_value *start, *total;

	if (err)
		return;
	start = bpf_map_lookup_elem(&entry_readings, &i);
	total = bpf_map_lookup_elem(&totals, &i);
	if (!start || !total || !start->enabled)
		return;
	// An event that is not active on this CPU reads without error but
	// stale, its enabled time standing still (seen with cpu-clock on 6.1
	// under qemu): that run was not counted.
	if (now->enabled == start->enabled) {
		start->enabled = 0;
		return;
	}
	if (i == 0)
		count_run(2);
	total->counter += now->counter - start->counter;
	total->enabled += now->enabled - start->enabled;
	total->running += now->running - start->running;
	// Consumed: a nested run on this CPU cannot reuse it.
	start->enabled = 0;
}

SEC("fentry/target")
int BPF_PROG(counters_entry)
{
	__u32 cpu = bpf_get_smp_processor_id();

	// Bookkeeping first, so that it falls outside the counted interval.
	count_run(0);
	read_entry(3, cpu);
	read_entry(2, cpu);
	read_entry(1, cpu);
	read_entry(0, cpu);
	return 0;
}

SEC("fexit/target")
int BPF_PROG(counters_exit)
{
	struct bpf_perf_event_value now[MAX_EVENTS] = {};
	__u32 cpu = bpf_get_smp_processor_id();
	long err0, err1, err2, err3;

	// Read first (in the reverse order of the entry), so that the
	// bookkeeping falls outside the counted interval.
	err0 = read_now(0, cpu, &now[0]);
	err1 = read_now(1, cpu, &now[1]);
	err2 = read_now(2, cpu, &now[2]);
	err3 = read_now(3, cpu, &now[3]);
	count_run(1);
	accumulate(0, err0, &now[0]);
	accumulate(1, err1, &now[1]);
	accumulate(2, err2, &now[2]);
	accumulate(3, err3, &now[3]);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
