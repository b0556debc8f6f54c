//go:build ignore

// The program loadrec's tests load with `bpftool prog load`: one socket
// filter, so bpftool loads and pins exactly one program.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("socket")
int loadrec_test(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
