package kfilter

//go:generate go tool bpf2go -target bpfel -output-stem kfilter -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" kfilter ../../bpf/kfilter/kfilter.c
