//go:build ignore

// The profiler's sample filter: a perf_event program attached to each
// sampling event (PERF_EVENT_IOC_SET_BPF). The kernel runs it on every
// sample before the sample is written, and writes only the samples it
// returns non-zero for (kernel/events/core.c, bpf_overflow_handler; 4.9
// and later, 6.1 and 6.18 alike). It passes a sample whose kernel call
// chain (the interrupted instruction first) has a frame on a page that
// holds BPF code or a hook's machinery, the pages user space keeps in
// `pages`; it drops the rest, which the profile would drop anyway. On an
// idle host that is nearly every sample, so the daemon is neither woken
// nor made to parse them.
//
// Pages, not ranges: a lookup per frame in a hash of page numbers is
// cheap and needs no sorted structure the kernel cannot search. A page
// shared with other code passes some samples the profile then drops:
// harmless, the filter only has to keep every sample the profile keeps.

#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

// MAX_FRAMES is the kernel's default perf_event_max_stack.
#define MAX_FRAMES 127
#define PAGE_SHIFT 12

// Kernel addresses start at the top half; a call chain's context markers
// (PERF_CONTEXT_KERNEL and friends) are above -4096 and never a page of
// code, so they miss in `pages` like any other address.

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u64);   // address >> 12
	__type(value, __u8);  // unused
	__uint(max_entries, 1); // set by the loader
} pages SEC(".maps");

// Per CPU: [0] samples passed, [1] samples dropped.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 2);
} counts SEC(".maps");

// [0]: non-zero passes every sample (the pages did not fit the map).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} config SEC(".maps");

// The call chain, per CPU: too big for the 512-byte stack. A perf_event
// program runs with the event's context, never nested on one CPU, so
// one buffer a CPU is enough.
struct frames {
	__u64 ip[MAX_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct frames);
	__uint(max_entries, 1);
} scratch SEC(".maps");

static __always_inline int verdict(int pass)
{
	__u32 k = pass ? 0 : 1;
	__u64 *n = bpf_map_lookup_elem(&counts, &k);

	if (n)
		*n += 1; // per CPU: no other writer
	return pass;
}

SEC("perf_event")
int bpfperf_kfilter(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	__u32 *all = bpf_map_lookup_elem(&config, &zero);
	struct frames *f;
	long n;

	if (all && *all)
		return verdict(1);
	f = bpf_map_lookup_elem(&scratch, &zero);
	if (!f)
		return verdict(1); // cannot happen; never lose a sample for it
	// With PERF_SAMPLE_CALLCHAIN the kernel hands over the chain it has
	// already taken for the sample (bpf_get_stack_pe): no second unwind.
	n = bpf_get_stack(ctx, f->ip, sizeof(f->ip), 0);
	if (n <= 0)
		return verdict(0); // no kernel frames: user mode
	n /= sizeof(__u64);
	for (int i = 0; i < MAX_FRAMES; i++) {
		if (i >= n)
			break;
		__u64 page = f->ip[i] >> PAGE_SHIFT;
		if (bpf_map_lookup_elem(&pages, &page))
			return verdict(1);
	}
	return verdict(0);
}

char LICENSE[] SEC("license") = "GPL";
