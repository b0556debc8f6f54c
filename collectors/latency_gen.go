package collectors

// The C source lives in bpf/latency; the generated object and loader are
// committed here so that `go build` needs no clang.

//go:generate go tool bpf2go -target bpfel -output-stem latency -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" latency ../bpf/latency/latency.c
