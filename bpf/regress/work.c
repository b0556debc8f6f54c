//go:build ignore

// Two versions of one socket filter for the regression tests: work runs
// base_work; work_more runs it and extra_work, half as much again, on a
// line of its own. Loaded under one name they are a reload with 1.5x the
// work, and the explanation must put the EXTRA line on top.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

#define BASE_ITERS 4000
#define EXTRA_ITERS 2000

static __noinline __u64 base_work(__u64 seed)
{
	__u64 acc = seed;

	for (int i = 0; i < BASE_ITERS; i++) {
		acc = (acc ^ (acc >> 7)) * 0x9e3779b1 + i; barrier_var(acc); /* BASE */
	}
	return acc;
}

static __noinline __u64 extra_work(__u64 seed)
{
	__u64 acc = seed;

	for (int i = 0; i < EXTRA_ITERS; i++) {
		acc = (acc ^ (acc >> 5)) * 0x85ebca6b + i; barrier_var(acc); /* EXTRA */
	}
	return acc;
}

SEC("socket")
int work(struct __sk_buff *skb)
{
	return (int)(base_work(skb->len) & 1);
}

SEC("socket")
int work_more(struct __sk_buff *skb)
{
	__u64 seed = skb->len;

	return (int)((base_work(seed) + extra_work(seed)) & 1);
}

/* A tail call: tc_entry only jumps to slot 0 of targets, where the test
 * puts tc_target and then tc_target_more (1.5x the work). The kernel
 * counts a tail-called program's time in its entry's stats, so the entry
 * program's ns/run steps up with no reload of its own: a shift, which the
 * explanation must pin on the target. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} targets SEC(".maps");

SEC("socket")
int tc_entry(struct __sk_buff *skb)
{
	bpf_tail_call(skb, &targets, 0);
	return 0;
}

SEC("socket")
int tc_target(struct __sk_buff *skb)
{
	return (int)(base_work(skb->len) & 1);
}

SEC("socket")
int tc_target_more(struct __sk_buff *skb)
{
	__u64 seed = skb->len;

	return (int)((base_work(seed) + extra_work(seed)) & 1);
}
