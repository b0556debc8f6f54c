//go:build ignore

// Who is loading a BPF program, kept where a late reader still finds it.
//
// The kernel's PERF_RECORD_BPF_EVENT says which task loaded a program (its
// pid and tid), but not its command or cgroup, and a loader such as
// `bpftool prog load` exits within milliseconds, often before Go reads the
// record, let alone /proc/PID. This program runs at the entry of every
// bpf(2) call; for BPF_PROG_LOAD it stores the caller's process, command
// and cgroup by thread id. The entry is written before the kernel emits
// the record (same task, same syscall, earlier), so when Go joins the
// record with the map by tid the entry is there: no race with the
// loader's exit.
//
// The map is an LRU hash, so it stays bounded however many threads load
// programs; an entry is overwritten by its thread's next load and
// otherwise ages out. Go never deletes entries (a thread that loads two
// programs before Go reads the first record would lose the second's).
//
// Kernel structs are declared with only the fields read, marked
// preserve_access_index (CO-RE), as in holders.c.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

// syscalls/sys_enter_bpf's record, from its tracefs format: the common
// fields (8 bytes), the syscall number, then each argument as 8 bytes.
struct sys_enter_bpf {
	__u64 common;
	__s32 syscall_nr;
	__u32 pad;
	__u64 cmd;
	__u64 uattr;
	__u64 size;
};

struct kernfs_node {
	const char *name;
} __attribute__((preserve_access_index));

// The parent pointer was renamed __parent in Linux 6.15 (it became RCU
// protected); CO-RE picks whichever the running kernel has.
struct kernfs_node___old {
	struct kernfs_node *parent;
} __attribute__((preserve_access_index));
struct kernfs_node___new {
	struct kernfs_node *__parent;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct task_struct {
	int tgid;
	struct task_struct *group_leader;
	char comm[16];
	struct css_set *cgroups;
} __attribute__((preserve_access_index));

// What Go reads per thread: 216 bytes, little-endian.
struct loader {
	__u32 pid;        // the process (tgid)
	__u32 pad;
	__u64 cgroup_id;  // cgroup v2 id: the cgroup directory's inode number
	__u64 time_ns;    // CLOCK_MONOTONIC, as the perf records' times
	char comm[16];    // the process's command: its group leader's comm, as /proc/PID/comm
	// The cgroup's own directory name and its parent's, kept because the
	// id alone names nothing once the cgroup is gone: a oneshot unit's
	// loader exits and systemd removes its cgroup within milliseconds.
	// Sized for a containerd scope (cri-containerd-<64 hex>.scope) and a
	// systemd pod slice (kubepods-besteffort-pod<uid>.slice).
	char cgroup_leaf[96];
	char cgroup_parent[80];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024); // Go sets Config.Loaders
	__type(key, __u32);        // tid
	__type(value, struct loader);
} loaders SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_bpf")
int bpfperf_loadrec(struct sys_enter_bpf *ctx)
{
	struct task_struct *task, *leader;
	struct kernfs_node *kn, *parent = 0;
	struct loader l = {};
	__u64 id;
	__u32 tid;

	if (ctx->cmd != BPF_PROG_LOAD)
		return 0;
	id = bpf_get_current_pid_tgid();
	tid = (__u32)id;
	l.pid = id >> 32;
	l.cgroup_id = bpf_get_current_cgroup_id();
	l.time_ns = bpf_ktime_get_ns();
	task = (struct task_struct *)bpf_get_current_task();
	kn = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn);
	if (kn) {
		bpf_probe_read_kernel_str(l.cgroup_leaf, sizeof(l.cgroup_leaf), BPF_CORE_READ(kn, name));
		if (bpf_core_field_exists(struct kernfs_node___new, __parent))
			parent = BPF_CORE_READ((struct kernfs_node___new *)kn, __parent);
		else
			parent = BPF_CORE_READ((struct kernfs_node___old *)kn, parent);
		if (parent)
			bpf_probe_read_kernel_str(l.cgroup_parent, sizeof(l.cgroup_parent), BPF_CORE_READ(parent, name));
	}
	leader = BPF_CORE_READ(task, group_leader);
	if (!leader || bpf_probe_read_kernel_str(l.comm, sizeof(l.comm), __builtin_preserve_access_index(&leader->comm)) < 0)
		bpf_get_current_comm(l.comm, sizeof(l.comm)); // the thread's, which it inherited
	bpf_map_update_elem(&loaders, &tid, &l, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
