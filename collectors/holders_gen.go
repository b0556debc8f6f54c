package collectors

// The C source lives in bpf/holders; the generated object and loader are
// committed here so that `go build` needs no clang.

//go:generate go tool bpf2go -target bpfel -output-stem holders -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" holders ../bpf/holders/holders.c
