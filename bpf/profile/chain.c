//go:build ignore

// A tail-call chain for the profile tests: chain_a spins, then tail-calls
// slot 1 (chain_b), which spins and tail-calls slot 2 (chain_c), which
// spins. The kernel charges the whole chain's run time to chain_a; a profile
// must give each of the three its own, roughly equal, samples.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

#define ITERS 1500

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u32);
} chain SEC(".maps");

static __always_inline __u64 work(__u64 acc)
{
	for (int i = 0; i < ITERS; i++) {
		acc = (acc ^ (acc >> 5)) * 0x100000001b3ULL + i; barrier_var(acc);
	}
	return acc;
}

SEC("socket")
int chain_a(struct __sk_buff *skb)
{
	if (work(skb->len) == 1)
		return 1;
	bpf_tail_call(skb, &chain, 1);
	return 0;
}

SEC("socket")
int chain_b(struct __sk_buff *skb)
{
	if (work(skb->len + 1) == 1)
		return 1;
	bpf_tail_call(skb, &chain, 2);
	return 0;
}

SEC("socket")
int chain_c(struct __sk_buff *skb)
{
	return (int)(work(skb->len + 2) & 1);
}
