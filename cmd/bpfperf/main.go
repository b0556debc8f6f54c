// Command bpfperf is the CLI of bpfperf: it talks to bpfperfd over its unix
// socket (status, progs, show, history) and runs BPF micro-benchmarks.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	app := newApp(dialDaemon)
	if err := app.Run(interspersed(app, os.Args)); err != nil {
		fmt.Fprintln(os.Stderr, "bpfperf: "+err.Error())
		os.Exit(1)
	}
}
