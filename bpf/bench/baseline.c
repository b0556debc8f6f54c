//go:build ignore

// Baseline: `r0 = 0; exit` under every hook whose BPF_PROG_TEST_RUN the
// kernel supports. The difference between them is the cost of building the
// hook's context.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

#define EMPTY(sec, name) \
	SEC(sec) int name(void *ctx) { return 0; }

EMPTY("socket", base_socket_filter)
EMPTY("tc", base_sched_cls)
EMPTY("action", base_sched_act)
EMPTY("xdp", base_xdp)
EMPTY("cgroup_skb/ingress", base_cgroup_skb)
EMPTY("lwt_in", base_lwt_in)
EMPTY("lwt_out", base_lwt_out)
EMPTY("lwt_xmit", base_lwt_xmit)
EMPTY("lwt_seg6local", base_lwt_seg6local)
EMPTY("flow_dissector", base_flow_dissector)
EMPTY("sk_lookup", base_sk_lookup)
EMPTY("netfilter", base_netfilter)
EMPTY("raw_tp/sys_enter", base_raw_tp)
EMPTY("syscall", base_syscall)
