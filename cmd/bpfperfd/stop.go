package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// stopWithin bounds how long bpfperfd takes to end after SIGTERM or
// SIGINT. Run stops in milliseconds once it is sampling; before that it
// may be inside a step nothing can interrupt (bbolt's open-time walk of a
// large store). bbolt commits are crash-safe, so exiting there loses
// nothing stored.
const stopWithin = 1500 * time.Millisecond

// exitIfStopIsSlow exits the process stopWithin after the signal if Run
// has not returned by then.
func exitIfStopIsSlow(ctx context.Context) {
	<-ctx.Done()
	time.Sleep(stopWithin)
	fmt.Fprintf(os.Stderr, "bpfperfd: still stopping %v after the signal: exiting now\n", stopWithin)
	os.Exit(1)
}
