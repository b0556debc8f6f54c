//go:build ignore

// Tail calls: tail_entry jumps to slot 0 of jmp; step_i sits in slot i and
// jumps to slot i+1. Filling slots 0..N-1 gives a chain of N tail calls; the
// last program's jump finds an empty slot (or the kernel's limit) and
// returns how many tail calls ran, so the depth is checked, not assumed.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

#define SLOTS 40

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} jmp SEC(".maps");

SEC("socket")
int tail_entry(struct __sk_buff *skb)
{
	bpf_tail_call(skb, &jmp, 0);
	return 0;
}

#define STEP(i)                                   \
	SEC("socket")                             \
	int step_##i(struct __sk_buff *skb)       \
	{                                         \
		bpf_tail_call(skb, &jmp, i + 1);  \
		return i + 1;                     \
	}

STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7) STEP(8) STEP(9)
STEP(10) STEP(11) STEP(12) STEP(13) STEP(14) STEP(15) STEP(16) STEP(17) STEP(18) STEP(19)
STEP(20) STEP(21) STEP(22) STEP(23) STEP(24) STEP(25) STEP(26) STEP(27) STEP(28) STEP(29)
STEP(30) STEP(31) STEP(32) STEP(33) STEP(34) STEP(35)
