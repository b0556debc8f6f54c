//go:build ignore

// Map access: one program per (map type, operation). Keys come from a
// sequence the runner writes into keys[] (uniform or Zipf), one key per
// run; keygen measures that overhead alone. Every program returns 0 on
// success and 1 when the map refused (miss, full), so the runner can check
// the last run's outcome. max_entries is set by the runner.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "Dual MIT/GPL";

#define KEYS 65536

__u32 keys[KEYS];
__u32 pos;

static __always_inline __u32 next_key(void)
{
	__u32 i = pos++;
	return keys[i & (KEYS - 1)];
}

struct lpm_key {
	__u32 prefixlen;
	__u32 addr;
};

#define MAP(name, mtype, flags, ktype)            \
	struct {                                  \
		__uint(type, mtype);              \
		__uint(max_entries, 1);           \
		__uint(map_flags, flags);         \
		__type(key, ktype);               \
		__type(value, __u64);             \
	} name SEC(".maps");

#define KEY_U32 __u32 key = next_key()
#define KEY_LPM struct lpm_key key; key.prefixlen = 32; key.addr = next_key()

#define LOOKUP(m, K)                                               \
	SEC("socket") int m##_lookup(void *ctx)                    \
	{                                                          \
		K;                                                 \
		return bpf_map_lookup_elem(&m, &key) ? 0 : 1;      \
	}

#define UPDATE(m, K)                                               \
	SEC("socket") int m##_update(void *ctx)                    \
	{                                                          \
		K;                                                 \
		__u64 *v = bpf_map_lookup_elem(&m, &key);          \
		if (!v)                                            \
			return 1;                                  \
		*v += 1;                                           \
		return 0;                                          \
	}

#define REPLACE(m, K)                                                       \
	SEC("socket") int m##_replace(void *ctx)                            \
	{                                                                   \
		K;                                                          \
		__u64 val = pos;                                            \
		return bpf_map_update_elem(&m, &key, &val, BPF_EXIST) ? 1 : 0; \
	}

#define DELETE_INSERT(m, K)                                                   \
	SEC("socket") int m##_delete_insert(void *ctx)                        \
	{                                                                     \
		K;                                                            \
		__u64 val = pos;                                              \
		bpf_map_delete_elem(&m, &key);                                \
		return bpf_map_update_elem(&m, &key, &val, BPF_NOEXIST) ? 1 : 0; \
	}

#define ALL_OPS(m, K) LOOKUP(m, K) UPDATE(m, K) REPLACE(m, K) DELETE_INSERT(m, K)

SEC("socket") int keygen(void *ctx)
{
	return next_key() == 0xffffffff;
}

MAP(array, BPF_MAP_TYPE_ARRAY, 0, __u32)
LOOKUP(array, KEY_U32) UPDATE(array, KEY_U32) REPLACE(array, KEY_U32)

MAP(percpu_array, BPF_MAP_TYPE_PERCPU_ARRAY, 0, __u32)
LOOKUP(percpu_array, KEY_U32) UPDATE(percpu_array, KEY_U32) REPLACE(percpu_array, KEY_U32)

MAP(hash, BPF_MAP_TYPE_HASH, 0, __u32)
ALL_OPS(hash, KEY_U32)

MAP(percpu_hash, BPF_MAP_TYPE_PERCPU_HASH, 0, __u32)
ALL_OPS(percpu_hash, KEY_U32)

MAP(lru_hash, BPF_MAP_TYPE_LRU_HASH, 0, __u32)
ALL_OPS(lru_hash, KEY_U32)

MAP(lru_percpu_hash, BPF_MAP_TYPE_LRU_PERCPU_HASH, 0, __u32)
ALL_OPS(lru_percpu_hash, KEY_U32)

MAP(lpm_trie, BPF_MAP_TYPE_LPM_TRIE, BPF_F_NO_PREALLOC, struct lpm_key)
ALL_OPS(lpm_trie, KEY_LPM)

struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
};

/* The verifier refuses updates of map-in-map from a program: lookup only. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct inner);
} array_of_maps SEC(".maps");
LOOKUP(array_of_maps, KEY_U32)

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct inner);
} hash_of_maps SEC(".maps");
LOOKUP(hash_of_maps, KEY_U32)
