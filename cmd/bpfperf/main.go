// Command bpfperf is the CLI of bpfperf: it talks to bpfperfd over its unix
// socket (status, progs, show, history) and runs BPF micro-benchmarks.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// version and commit are set at build time with -ldflags "-X main.version=...
// -X main.commit=..." (the Makefile does): go build's own VCS stamp is off
// where GOFLAGS has -buildvcs=false.
var (
	version = "dev"
	commit  = ""
)

func main() {
	app := newApp(dialDaemon)
	if err := app.Run(interspersed(app, os.Args)); err != nil {
		code := 1
		var ee exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		// An exit status passed through (stat) comes without a message.
		if err.Error() != "" {
			fmt.Fprintln(os.Stderr, "bpfperf: "+err.Error())
		}
		// A command with exit statuses of its own (store check) says so.
		var coded cli.ExitCoder
		if errors.As(err, &coded) && coded.ExitCode() > 0 {
			code = coded.ExitCode()
		}
		os.Exit(code)
	}
}
