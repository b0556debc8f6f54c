//go:build ignore

// The holders iterator: one pass of iter/task_file over the open files of
// every process writes a record per BPF program, link and map file, so
// the daemon learns who holds what without reading /proc/<pid>/fd and
// fdinfo file by file (a readlink and an fdinfo read per fd: a process
// holding 10,000 programs cost 0.2 s of CPU a scan).
//
// A BPF file is an anonymous inode whose dentry is named "bpf-prog",
// "bpf_link" or "bpf-map" (readlink shows "anon_inode:<name>"), and whose
// private_data is the struct bpf_prog, bpf_link or bpf_map. Threads that
// share their leader's file table are visited once (the kernel's default
// for task_file). Kernel structs are declared with only the fields read,
// marked preserve_access_index (CO-RE), as in progiter.c.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct task_struct {
	int tgid;
} __attribute__((preserve_access_index));

struct qstr {
	const unsigned char *name;
} __attribute__((preserve_access_index));

struct dentry {
	struct qstr d_name;
} __attribute__((preserve_access_index));

struct path {
	struct dentry *dentry;
} __attribute__((preserve_access_index));

struct file {
	struct path f_path;
	void *private_data;
} __attribute__((preserve_access_index));

struct bpf_iter__task_file {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	__u32 fd;
	struct file *file;
} __attribute__((preserve_access_index));

struct bpf_prog_aux {
	__u32 id;
} __attribute__((preserve_access_index));

struct bpf_prog {
	struct bpf_prog_aux *aux;
} __attribute__((preserve_access_index));

struct bpf_link {
	struct bpf_prog *prog;
} __attribute__((preserve_access_index));

struct bpf_map {
	__u32 id;
} __attribute__((preserve_access_index));

// Kinds of record, as Go reads them.
#define KIND_PROG 1
#define KIND_LINK 2
#define KIND_MAP 3

// What the iterator writes per BPF file: 16 bytes, little-endian. For a
// link, id is its program's id (0 if it has none).
struct record {
	__u32 tgid;
	__u32 kind;
	__u32 id;
	__u32 fd;
};

// The dentry names, as little-endian u64s of their first 8 bytes.
#define NAME_PROG 0x676f72702d667062ULL // "bpf-prog"
#define NAME_LINK 0x6b6e696c5f667062ULL // "bpf_link"
#define NAME_MAP 0x0070616d2d667062ULL  // "bpf-map\0"

SEC("iter/task_file")
int bpfperf_holders(struct bpf_iter__task_file *ctx)
{
	struct file *file = ctx->file;
	struct task_struct *task = ctx->task;
	struct record r = {};
	const unsigned char *name;
	__u8 n[9] = {};
	__u64 head;
	void *obj;

	if (!file || !task)
		return 0;
	name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	if (!name || bpf_probe_read_kernel(n, sizeof(n), name))
		return 0;
	__builtin_memcpy(&head, n, sizeof(head));
	obj = BPF_CORE_READ(file, private_data);
	if (!obj)
		return 0;
	if (head == NAME_PROG && n[8] == 0) {
		r.kind = KIND_PROG;
		r.id = BPF_CORE_READ((struct bpf_prog *)obj, aux, id);
	} else if (head == NAME_LINK && n[8] == 0) {
		r.kind = KIND_LINK;
		if (BPF_CORE_READ((struct bpf_link *)obj, prog))
			r.id = BPF_CORE_READ((struct bpf_link *)obj, prog, aux, id);
	} else if (head == NAME_MAP) {
		r.kind = KIND_MAP;
		r.id = BPF_CORE_READ((struct bpf_map *)obj, id);
	} else {
		return 0;
	}
	r.tgid = task->tgid;
	r.fd = ctx->fd;
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
