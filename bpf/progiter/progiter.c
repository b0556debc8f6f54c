//go:build ignore

// The iterator sweep: one BPF iterator over every loaded program
// (iter/bpf_prog) writes a fixed-size binary record per program, so one
// read() of the iterator gives every program's cumulative run-time stats
// without opening any of them.
//
// The kernel keeps a program's stats per CPU (prog->stats, a __percpu
// pointer that the kernel's BTF does not tag as per-CPU, so bpf_per_cpu_ptr
// refuses it). The program derives each CPU's per-CPU offset itself:
// bpf_map_lookup_percpu_elem on the one-slot per-CPU array `pcpu` gives the
// slot's address on CPU n, that array's own __percpu base (bpf_array.pptrs[0])
// subtracted from it is CPU n's offset, and prog->stats plus that offset is
// CPU n's struct bpf_prog_stats. Summed over the possible CPUs as
// bpf_prog_get_stats does. Needs Linux 5.19 (bpf_map_lookup_percpu_elem)
// and kernel BTF.
//
// Kernel structs are declared here with only the fields read, marked
// preserve_access_index, so every offset is a CO-RE relocation against the
// running kernel's BTF and no vmlinux.h is needed.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct bpf_prog_aux {
	__u32 id;
	char name[16];
	__u64 load_time;
} __attribute__((preserve_access_index));

// The kernel's counters are u64_stats_t, a struct on every arch; a local
// struct matches any struct under CO-RE.
struct bpf_prog_stats {
	struct { __u64 v; } cnt;
	struct { __u64 v; } nsecs;
	struct { __u64 v; } misses;
} __attribute__((preserve_access_index));

struct bpf_prog {
	enum bpf_prog_type type;
	__u8 tag[8];
	struct bpf_prog_aux *aux;
	struct bpf_prog_stats *stats; // __percpu
} __attribute__((preserve_access_index));

struct bpf_iter__bpf_prog {
	struct bpf_iter_meta *meta;
	struct bpf_prog *prog;
} __attribute__((preserve_access_index));

struct bpf_array {
	void *pptrs[0]; // __percpu, in an anonymous union after struct bpf_map
} __attribute__((preserve_access_index));

// What the iterator writes per program: 64 bytes, little-endian on the
// targets bpf2go builds for. Go reads it as progiterRecord.
struct record {
	__u32 id;
	__u32 type;
	__u8 tag[8];
	char name[16];
	__u64 load_time; // ns since boot (CLOCK_BOOTTIME), as bpf_prog_info's
	__u64 run_cnt;
	__u64 run_time_ns;
	__u64 recursion_misses;
};

// Possible CPUs (ebpf.PossibleCPU), set by Go before loading.
const volatile __u32 nr_cpus = 1;

// One slot whose addresses on each CPU give the per-CPU offsets.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} pcpu SEC(".maps");

// as_scalar returns a pointer's value as a plain number. The verifier
// refuses arithmetic on map pointers, and a pointer into a map value
// minus an unknown scalar stays a pointer it will not let us add to
// another address; a copy through bpf_probe_read_kernel is a scalar.
static __always_inline __u64 as_scalar(const void *p)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &p);
	return v;
}

// CPU n's per-CPU offset is the same for every program and for as long
// as the kernel runs: computed on the first run for the first
// CACHED_CPUS CPUs, read from here after. Past them (a machine with more
// CPUs) each program computes it again, as every run once did.
#define CACHED_CPUS 1024

// cached_cpus lowers the cache's reach below CACHED_CPUS: tests set it to
// 1 to run the uncached path on a VM's 16 CPUs.
const volatile __u32 cached_cpus = CACHED_CPUS;

__u64 cpu_offset[CACHED_CPUS];
__u32 offsets_ready;

// no_output makes the program read everything and write nothing: the
// floor benchmark's "walk and read" figure, the cost of the reads alone
// without the copy to user space. The sums go to read_sink so the reads
// stay in the program.
const volatile __u32 no_output = 0;
__u64 read_sink;

// The changed-only sweep (ProgIter.SweepChanged). An idle host's programs
// do not move between ticks, so copying every one to user space each tick,
// and comparing each there, is work proportional to the programs loaded
// when only those that ran need it. With changed_only set, the program
// remembers each program's counters in `last` and writes a record only for
// a program that is new, was loaded again under its id, or whose counters
// moved; the rest it only counts. It remembers them by their place in the
// walk (seq_num: the walk is in id order), in an array, so the lookup is a
// step through memory the walk reads in order, not a hash table's cache
// misses: a program that comes or goes moves those after it, which are
// then written once, as changed. After the last program it writes one
// trailer record (id 0, type TRAILER_TYPE) with how many programs the walk
// saw and the sum of mix(id, load_time) over them, so user space can tell
// that none went away without seeing them: it keeps the same count and
// sum over the programs it knows.
//
// A record is remembered only once bpf_seq_write took it: a write that
// does not fit makes the kernel show the same program again on the next
// read(), and that showing must still find it changed. Only one walk runs
// at a time (ProgIter's mutex); session_id tells a new walk from the rest
// of one that stopped short. Raising `epoch` makes every program changed
// once: the full sweep, which also proves the remembered state right.
#define TRAILER_TYPE 0xffffffff

struct last {
	__u32 id;
	__u64 load_time;
	__u64 run_cnt;
	__u64 run_time_ns;
	__u64 recursion_misses;
	__u64 epoch;
};

// Its size is set by Go (from the programs loaded when it starts);
// programs past it are written every time, as without it.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct last);
} last SEC(".maps");

__u32 changed_only;
__u64 epoch;
__u64 walk_session, walk_count, walk_sum;

// ended_session is the walk whose trailer went out. The kernel may still
// show it a program: once the trailer is written the walk is done
// (bpf_iter_done_stop), but the read() that user space makes to see the
// end calls the iterator's start again, which finds any program loaded
// since the walk passed its id, and shows it after the trailer (the
// stop call after it is skipped: done_stop). User space would then find
// no trailer last (collectors.ErrNoTrailer, seen once in CI); such a
// program writes nothing here and is new to the next walk.
__u64 ended_session;

// mix spreads a program's id and load time over 64 bits, so that a sum of
// them over a set changes when any member does. It is splitmix64's
// finaliser; collectors.MixProgram is the same in Go.
static __always_inline __u64 mix(__u32 id, __u64 load_time)
{
	__u64 x = load_time + (__u64)id * 0x9e3779b97f4a7c15ULL;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

// unchanged says whether the program whose record is r, at place seq in
// the walk, was written before with these counters, in this epoch; slot
// is its place in `last`, NULL past its end.
static __always_inline int unchanged(const struct record *r, __u64 seq, struct last **slot)
{
	__u32 i = seq;
	struct last *l = seq < 0xffffffff ? bpf_map_lookup_elem(&last, &i) : 0;

	*slot = l;
	return l && l->id == r->id && l->epoch == epoch && l->load_time == r->load_time && l->run_cnt == r->run_cnt &&
	       l->run_time_ns == r->run_time_ns && l->recursion_misses == r->recursion_misses;
}

// remember keeps r's counters as written in its slot, if it has one.
static __always_inline void remember(const struct record *r, struct last *l)
{
	if (!l)
		return;
	l->id = r->id;
	l->load_time = r->load_time;
	l->run_cnt = r->run_cnt;
	l->run_time_ns = r->run_time_ns;
	l->recursion_misses = r->recursion_misses;
	l->epoch = epoch;
}

// trailer writes the walk's count and sum after its last program.
static __always_inline void trailer(struct seq_file *seq)
{
	struct record t = {
		.type = TRAILER_TYPE,
		.run_cnt = walk_count,
		.run_time_ns = walk_sum,
	};

	if (bpf_seq_write(seq, &t, sizeof(t)) == 0) {
		ended_session = walk_session;
		walk_session = 0; // the next walk starts its own count
	}
}

// cpu_offset_of returns CPU cpu's per-CPU offset, or 0 when the map has no
// such CPU (cpu >= nr_cpu_ids).
static __always_inline __u64 cpu_offset_of(__u64 cpu, __u64 base)
{
	__u32 zero = 0;
	void *slot;

	slot = bpf_map_lookup_percpu_elem(&pcpu, &zero, cpu);
	if (!slot)
		return 0;
	return as_scalar(slot) - base;
}

static long fill_offset(__u64 cpu, void *data)
{
	__u64 base = *(__u64 *)data;

	if (cpu >= CACHED_CPUS || cpu >= cached_cpus)
		return 1;
	cpu_offset[cpu] = cpu_offset_of(cpu, base);
	return cpu_offset[cpu] || cpu == 0 ? 0 : 1;
}

// pcpu_base is pcpu's own __percpu base, bpf_array.pptrs[0]; 0 if unread.
static __always_inline __u64 pcpu_base(void)
{
	__u64 arr = as_scalar(&pcpu), base = 0;

	bpf_probe_read_kernel(&base, sizeof(base), (void *)(arr + bpf_core_field_offset(struct bpf_array, pptrs)));
	return base;
}

struct sum {
	__u64 stats; // prog->stats, a __percpu address
	__u64 base;  // pcpu's __percpu base, read when a CPU is past the cache
	__u64 cnt, nsecs, misses;
};

// The three counters are adjacent in struct bpf_prog_stats (u64_stats_sync
// is empty on 64-bit kernels): one read per CPU covers them. A kernel that
// lays them out otherwise fails the load-time check in bpfperf_progs and
// reads them one at a time.
#define STATS_SPAN (3 * sizeof(__u64))

static long add_cpu(__u64 cpu, void *data)
{
	struct sum *s = data;
	__u64 off, at, v[3] = {};

	if (cpu < CACHED_CPUS && cpu < cached_cpus) {
		off = cpu_offset[cpu];
	} else {
		if (!s->base)
			s->base = pcpu_base();
		off = cpu_offset_of(cpu, s->base);
	}
	if (!off && cpu > 0)
		return 1; // no more CPUs
	at = s->stats + off;
	if (bpf_core_field_offset(struct bpf_prog_stats, nsecs) == bpf_core_field_offset(struct bpf_prog_stats, cnt) + 8 &&
	    bpf_core_field_offset(struct bpf_prog_stats, misses) == bpf_core_field_offset(struct bpf_prog_stats, cnt) + 16) {
		bpf_probe_read_kernel(v, STATS_SPAN, (void *)(at + bpf_core_field_offset(struct bpf_prog_stats, cnt)));
	} else {
		bpf_probe_read_kernel(&v[0], sizeof(v[0]), (void *)(at + bpf_core_field_offset(struct bpf_prog_stats, cnt)));
		bpf_probe_read_kernel(&v[1], sizeof(v[1]), (void *)(at + bpf_core_field_offset(struct bpf_prog_stats, nsecs)));
		bpf_probe_read_kernel(&v[2], sizeof(v[2]), (void *)(at + bpf_core_field_offset(struct bpf_prog_stats, misses)));
	}
	s->cnt += v[0];
	s->nsecs += v[1];
	s->misses += v[2];
	return 0;
}

SEC("iter/bpf_prog")
int bpfperf_progs(struct bpf_iter__bpf_prog *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct bpf_prog *prog = ctx->prog;
	struct record r = {};
	struct sum s = {};
	struct bpf_prog_aux *aux;

	if (changed_only && ctx->meta->session_id == ended_session)
		return 0; // shown after the trailer: see ended_session
	if (ctx->meta->session_id != walk_session) {
		walk_session = ctx->meta->session_id;
		walk_count = 0;
		walk_sum = 0;
	}
	if (!prog) {
		// The end of the walk.
		if (changed_only && !no_output)
			trailer(seq);
		return 0;
	}
	if (!offsets_ready) {
		// Two sweeps at once both fill it, with the same values.
		__u64 base = pcpu_base();

		if (!base)
			return 0;
		bpf_loop(nr_cpus < CACHED_CPUS ? nr_cpus : CACHED_CPUS, fill_offset, &base, 0);
		offsets_ready = 1;
	}
	// ctx->prog is a trusted kernel pointer: its fields are plain loads
	// (the verifier makes them fault-safe), far cheaper than a
	// bpf_probe_read_kernel each. prog->stats is read as a number, since
	// it is a __percpu address and not a pointer to follow.
	aux = prog->aux;
	r.id = aux->id;
	r.type = prog->type;
	r.load_time = aux->load_time;
	__builtin_memcpy(r.tag, prog->tag, sizeof(r.tag));
	__builtin_memcpy(r.name, aux->name, sizeof(r.name));
	bpf_probe_read_kernel(&s.stats, sizeof(s.stats), &prog->stats);
	// bpf_loop verifies add_cpu once, so any CPU count loads; it stops at
	// nr_cpus (at most 1 << 23, the kernel's bpf_loop limit) or at the
	// first CPU the map does not have.
	if (s.stats)
		bpf_loop(nr_cpus, add_cpu, &s, 0);
	r.run_cnt = s.cnt;
	r.run_time_ns = s.nsecs;
	r.recursion_misses = s.misses;
	if (no_output) {
		read_sink += r.id + r.type + r.load_time + r.tag[0] + r.name[0] + r.run_cnt + r.run_time_ns + r.recursion_misses;
		return 0;
	}
	if (!changed_only) {
		bpf_seq_write(seq, &r, sizeof(r));
		return 0;
	}
	struct last *l;

	if (!unchanged(&r, ctx->meta->seq_num, &l)) {
		if (bpf_seq_write(seq, &r, sizeof(r)))
			return 0; // shown again on the next read()
		remember(&r, l);
	}
	walk_count++;
	walk_sum += mix(r.id, r.load_time);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
