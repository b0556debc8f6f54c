//go:build ignore

// Who loaded each BPF program, kept by program id where a late reader
// still finds it.
//
// The kernel's PERF_RECORD_BPF_EVENT says a program was loaded (its id and
// tag) but not by whom. It can append the task's pid, tid and time
// (sample_id_all), but asking for them harms every other reader of these
// records started before us: the kernel grows the shared record by each
// reader's sample_id and never puts the size back, so `perf record`
// reads pid 0 and time 0 for loads (docs/identity.md). So the follower
// does not ask, and these programs say who loaded what instead, in
// `loaded`, by program id, for Go to read when the load record comes:
//
// - where the kernel can attach tracing programs, one at the entry of
//   perf_event_bpf_event, which makes the load record, in the loader's
//   own call, with the program in hand (its id assigned): the caller's
//   process, command, cgroup and time. Nothing else runs it, so it costs
//   the host nothing beyond loads;
// - elsewhere, two on the bpf(2) system call's tracepoints: at the entry,
//   for BPF_PROG_LOAD, the same facts go into `loading`, by thread id; at
//   the exit, when the call returned an fd, that fd's program id is read
//   from the task's file table and the entry moves to `loaded`. A syscall
//   tracepoint puts every system call of every task on the kernel's
//   traced path, which costs them tens of ns.
//
// A loader such as `bpftool prog load` exits within milliseconds, often
// before Go reads the record, let alone /proc/PID: the entry outlives it.
// Both maps are plain hashes, bounded. Go deletes a `loaded` entry once
// its record is read, and sweeps out entries left by records the kernel
// dropped; a `loading` entry lives from the call's entry to its exit. A
// full `loaded` refuses the newest loads, not the oldest: in a burst that
// overflows the follower's rings it is the oldest records that survive,
// so those are the entries to keep (an LRU kept the newest, and named
// none of the loads whose records came through).
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

// syscalls/sys_exit_bpf's record: the common fields, the syscall
// number, and the return value (a new program's fd).
struct sys_exit_bpf {
	__u64 common;
	__s32 syscall_nr;
	__u32 pad;
	__s64 ret;
};

// The path from a task to the program behind one of its fds: files ->
// fdt -> fd[n] -> private_data (a program fd's is its struct bpf_prog) ->
// aux -> id. Unchanged in meaning from Linux 4.13 (program ids) to 6.18.
struct file {
	void *private_data;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct bpf_prog_aux {
	__u32 id;
} __attribute__((preserve_access_index));

struct bpf_prog {
	struct bpf_prog_aux *aux;
} __attribute__((preserve_access_index));

struct task_struct {
	int tgid;
	struct task_struct *group_leader;
	char comm[16];
	struct css_set *cgroups;
	struct files_struct *files;
} __attribute__((preserve_access_index));

// What Go reads per program: 216 bytes, little-endian.
struct loader {
	__u32 pid;        // the process (tgid)
	__u32 tid;        // the thread that made the call
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

// Every bpf(2) call's exit looks it up, and it holds only calls in
// flight, as the exit deletes what the entry wrote.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024); // Go sets Config.Loaders
	__type(key, __u32);        // tid, from the call's entry to its exit
	__type(value, struct loader);
} loading SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024); // Go sets Config.Loaders
	__type(key, __u32);        // program id, until Go reads it
	__type(value, struct loader);
} loaded SEC(".maps");

// fill says who is calling: the process, thread, cgroup (its id and the
// names of it and its parent), command and time.
static __always_inline void fill(struct loader *l)
{
	struct task_struct *task, *leader;
	struct kernfs_node *kn, *parent = 0;
	__u64 id = bpf_get_current_pid_tgid();

	l->pid = id >> 32;
	l->tid = (__u32)id;
	l->cgroup_id = bpf_get_current_cgroup_id();
	l->time_ns = bpf_ktime_get_ns();
	task = (struct task_struct *)bpf_get_current_task();
	kn = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn);
	if (kn) {
		bpf_probe_read_kernel_str(l->cgroup_leaf, sizeof(l->cgroup_leaf), BPF_CORE_READ(kn, name));
		if (bpf_core_field_exists(struct kernfs_node___new, __parent))
			parent = BPF_CORE_READ((struct kernfs_node___new *)kn, __parent);
		else
			parent = BPF_CORE_READ((struct kernfs_node___old *)kn, parent);
		if (parent)
			bpf_probe_read_kernel_str(l->cgroup_parent, sizeof(l->cgroup_parent), BPF_CORE_READ(parent, name));
	}
	leader = BPF_CORE_READ(task, group_leader);
	if (!leader || bpf_probe_read_kernel_str(l->comm, sizeof(l->comm), __builtin_preserve_access_index(&leader->comm)) < 0)
		bpf_get_current_comm(l->comm, sizeof(l->comm)); // the thread's, which it inherited
}

// PERF_BPF_EVENT_PROG_LOAD, as perf_event_bpf_event's type.
#define PROG_LOAD 1

// perf_event_bpf_event(struct bpf_prog *prog, enum perf_bpf_event_type
// type, u16 flags): called by BPF_PROG_LOAD after the program got its id,
// right before it makes the load record, in the loader's context.
SEC("fentry/perf_event_bpf_event")
int bpfperf_loadent(__u64 *ctx)
{
	struct bpf_prog *prog = (struct bpf_prog *)ctx[0];
	struct loader l = {};
	__u32 id;

	if ((int)ctx[1] != PROG_LOAD)
		return 0;
	id = BPF_CORE_READ(prog, aux, id);
	if (!id)
		return 0;
	fill(&l);
	bpf_map_update_elem(&loaded, &id, &l, BPF_ANY); // fails when full: see above
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_bpf")
int bpfperf_loadrec(struct sys_enter_bpf *ctx)
{
	struct loader l = {};

	if (ctx->cmd != BPF_PROG_LOAD)
		return 0;
	fill(&l);
	bpf_map_update_elem(&loading, &l.tid, &l, BPF_ANY);
	return 0;
}

// progID is the id of the program behind the calling task's fd, 0 where
// the fd is out of its table or holds nothing.
static __always_inline __u32 progID(long fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds, *file = 0;
	struct bpf_prog *prog;

	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) < 0 || !file)
		return 0;
	prog = BPF_CORE_READ(file, private_data);
	if (!prog)
		return 0;
	return BPF_CORE_READ(prog, aux, id);
}

// At the exit of a bpf(2) call whose entry stored a BPF_PROG_LOAD: the fd
// it returned is the new program's (installed by this very call, in this
// task's table; another thread of the loader could close it and reuse
// the number in the microseconds between, which would read another
// file's private data: Go only takes an entry a load record names).
SEC("tracepoint/syscalls/sys_exit_bpf")
int bpfperf_loaded(struct sys_exit_bpf *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct loader *l = bpf_map_lookup_elem(&loading, &tid);
	__u32 id;

	if (!l)
		return 0;
	id = progID(ctx->ret);
	if (id)
		bpf_map_update_elem(&loaded, &id, l, BPF_ANY); // fails when full: see above
	bpf_map_delete_elem(&loading, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
