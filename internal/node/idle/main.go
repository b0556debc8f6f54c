// Command idle is the test node's pause process and its containers' default
// workload: it waits until it is told to stop. Built static, it is the one
// file of an image (nothing can be pulled here).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As pid 1 of a container the kernel ignores SIGTERM unless a handler
	// is installed: without one, StopContainer would wait its whole
	// timeout and then kill.
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
