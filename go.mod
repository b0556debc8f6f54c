module github.com/bpfperf/bpfperf

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	golang.org/x/sys v0.49.0
)

require go.etcd.io/bbolt v1.5.0 // indirect

tool github.com/cilium/ebpf/cmd/bpf2go
