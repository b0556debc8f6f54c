//go:build ignore

// One socket filter, reg_prog, for the pinned-reload test: loaded with
// `bpftool prog load` from its object file and pinned, as users pin
// programs, then replaced at the same pin. Each run turns a loop TURNS
// times: 400 in v1, 600 in v2, 1.5x the work.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

SEC("socket")
int reg_prog(struct __sk_buff *skb)
{
	__u64 acc = skb->len;

	for (int i = 0; i < TURNS; i++) {
		acc = (acc ^ (acc >> 7)) * 0x9e3779b1 + i;
		barrier_var(acc);
	}
	return (int)(acc & 1);
}
