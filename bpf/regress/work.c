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
