// Command helm runs the helm version tools/helm pins, building it into
// the tools cache first when it is missing (chart.Helm): `go run
// ./internal/chart/cmd/helm lint charts/bpfperf`. With -path it prints
// the binary's path and runs nothing (.ci/deps uses it to build helm
// ahead of the tests). Run it from the repository's root.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"

	"github.com/bpfperf/bpfperf/internal/chart"
)

func main() {
	pathOnly := flag.Bool("path", false, "print the pinned helm's path (building it when missing) and exit")
	flag.Parse()
	helm, err := chart.Helm(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		os.Exit(1)
	}
	if *pathOnly {
		fmt.Println(helm)
		return
	}
	cmd := exec.Command(helm, flag.Args()...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "helm:", err)
		os.Exit(1)
	}
}
