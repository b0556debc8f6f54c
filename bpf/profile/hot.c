//go:build ignore

// A socket filter with two static subprograms and one obviously hot line,
// for the profile tests: a profile of it running in a loop must name
// hot_entry, warm and spin, and put the most samples on the line marked HOT.
// Each loop is one line: a sample may land on the loop's branch or its body
// (emulated CPUs, TCG, sample at the end of a block, the branch), and both
// must count for the same line.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

#define HOT_ITERS 4000
#define WARM_ITERS 400

static __noinline __u64 warm(__u64 seed)
{
	__u64 acc = seed;

	for (int i = 0; i < WARM_ITERS; i++) { acc = acc * 7 + i; barrier_var(acc); } /* WARM */
	return acc;
}

static __noinline __u64 spin(__u64 seed)
{
	__u64 acc = seed;

	for (int i = 0; i < HOT_ITERS; i++) { acc = (acc ^ (acc >> 7)) * 0x9e3779b1 + i; barrier_var(acc); } /* HOT */
	return acc;
}

SEC("socket")
int hot_entry(struct __sk_buff *skb)
{
	__u64 seed = skb->len;

	return (int)((warm(seed) + spin(seed)) & 1);
}
