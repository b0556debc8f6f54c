package daemon_test

// The regression tests' programs (bpf/regress/work.c), generated as test
// files and committed, so that `go test` needs no clang.

//go:generate go tool bpf2go -target bpfel -output-stem work -output-suffix _test -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" work ../bpf/regress/work.c
