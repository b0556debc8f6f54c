package profile

// The C sources of the test programs live in bpf/profile; their objects and
// loaders are generated as test files (so the daemon does not embed them)
// and committed, so that `go test` needs no clang.

//go:generate go tool bpf2go -target bpfel -output-stem hot -output-suffix _test -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" hot ../bpf/profile/hot.c
//go:generate go tool bpf2go -target bpfel -output-stem chain -output-suffix _test -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" chain ../bpf/profile/chain.c
