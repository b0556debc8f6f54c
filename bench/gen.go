package bench

// The C sources live in bpf/bench; the generated objects and loaders are
// committed here so that `go build` needs no clang.

//go:generate go tool bpf2go -target bpfel -output-stem baseline -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" baseline ../bpf/bench/baseline.c
//go:generate go tool bpf2go -target bpfel -output-stem tailcall -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" tailcall ../bpf/bench/tailcall.c
//go:generate go tool bpf2go -target bpfel -output-stem maps -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" maps ../bpf/bench/maps.c
//go:generate go tool bpf2go -target bpfel -output-stem helpers -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" helpers ../bpf/bench/helpers.c
