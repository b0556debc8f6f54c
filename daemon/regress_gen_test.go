package daemon_test

// The regression tests' programs (bpf/regress/work.c), generated as test
// files and committed, so that `go test` needs no clang.

//go:generate go tool bpf2go -target bpfel -output-stem work -output-suffix _test -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" work ../bpf/regress/work.c

// The pinned-reload test's two versions of one program (bpf/regress/pinned.c),
// loaded from their object files by bpftool.
//go:generate go tool bpf2go -target bpfel -output-stem pinned_v1 -output-suffix _test -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -DTURNS=400" pinnedV1 ../bpf/regress/pinned.c
//go:generate go tool bpf2go -target bpfel -output-stem pinned_v2 -output-suffix _test -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -DTURNS=600" pinnedV2 ../bpf/regress/pinned.c
