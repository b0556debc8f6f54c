package loadrec

// The C sources live in bpf/loadrec; the generated objects and loaders are
// committed here so that `go build` needs no clang. testprog is what the
// tests load with bpftool (a file it can read), hence _test.

//go:generate go tool bpf2go -target bpfel -output-stem loaders -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" loaders ../../bpf/loadrec/loaders.c
//go:generate go tool bpf2go -target bpfel -output-stem testprog -output-suffix _test -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" testprog ../../bpf/loadrec/testprog.c
