//go:build ignore

// Helpers and ring buffer output. Each program calls one helper once per run
// and returns 0 when it succeeded.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

SEC("socket") int ktime_get_ns(void *ctx)
{
	bpf_ktime_get_ns();
	return 0;
}

SEC("socket") int ktime_get_boot_ns(void *ctx)
{
	bpf_ktime_get_boot_ns();
	return 0;
}

SEC("socket") int get_prandom_u32(void *ctx)
{
	bpf_get_prandom_u32();
	return 0;
}

SEC("socket") int get_smp_processor_id(void *ctx)
{
	bpf_get_smp_processor_id();
	return 0;
}

SEC("socket") int trace_printk(void *ctx)
{
	bpf_printk("bpfperf bench");
	return 0;
}

/* Grow the head by 4 bytes and give them back, so repeated runs on the same
 * buffer stay in bounds: two helper calls per run. */
SEC("xdp") int xdp_adjust_head(struct xdp_md *ctx)
{
	if (bpf_xdp_adjust_head(ctx, -4))
		return XDP_ABORTED;
	if (bpf_xdp_adjust_head(ctx, 4))
		return XDP_ABORTED;
	return XDP_PASS;
}

struct locked {
	struct bpf_spin_lock lock;
	__u64 value;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct locked);
} locks SEC(".maps");

/* Lock, increment, unlock: uncontended unless runs are parallel. */
SEC("tc") int spin_lock(struct __sk_buff *skb)
{
	__u32 key = 0;
	struct locked *l = bpf_map_lookup_elem(&locks, &key);
	if (!l)
		return 1;
	bpf_spin_lock(&l->lock);
	l->value++;
	bpf_spin_unlock(&l->lock);
	return 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} rb SEC(".maps");

char record[4096];

#define RB_OUTPUT(n)                                                    \
	SEC("socket") int ringbuf_output_##n(void *ctx)                 \
	{                                                               \
		return bpf_ringbuf_output(&rb, record, n, BPF_RB_NO_WAKEUP) ? 1 : 0; \
	}

#define RB_RESERVE(n)                                                   \
	SEC("socket") int ringbuf_reserve_##n(void *ctx)                \
	{                                                               \
		void *p = bpf_ringbuf_reserve(&rb, n, 0);               \
		if (!p)                                                 \
			return 1;                                       \
		bpf_ringbuf_submit(p, BPF_RB_NO_WAKEUP);                \
		return 0;                                               \
	}

RB_OUTPUT(8) RB_OUTPUT(64) RB_OUTPUT(256) RB_OUTPUT(1024) RB_OUTPUT(4096)
RB_RESERVE(8) RB_RESERVE(64) RB_RESERVE(256) RB_RESERVE(1024) RB_RESERVE(4096)
