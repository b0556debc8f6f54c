package netspace

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// errGone is a namespace that went away (its processes exited, its
// mount removed) between the listing and the visit: nothing to report.
var errGone = errors.New("namespace gone")

// inEach calls visit in each of nss, on one OS thread locked for that and
// moved from namespace to namespace with setns(2), so that the netlink
// sockets visit opens and the ifindexes it passes to bpf(2) are that
// namespace's; then it moves the thread back. A thread that cannot move
// back is never unlocked, so the runtime ends it with its goroutine and
// no other goroutine runs in a namespace not its own. No file stays
// open past a visit. Requires CAP_SYS_ADMIN.
func inEach(procRoot string, nss []Namespace, visit func(Namespace)) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("%s/thread-self/ns/net", procRoot))
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open own network namespace: %w", err)
			return
		}
		defer home.Close()
		// One line for all that could not be entered (a daemon without
		// CAP_SYS_ADMIN enters none), not one per namespace.
		var failed error
		refused := 0
		for _, ns := range nss {
			err := enter(ns)
			if errors.Is(err, errGone) {
				continue
			}
			if err != nil {
				if refused++; failed == nil {
					failed = fmt.Errorf("network namespace %d: %w", ns.Inode, err)
				}
				continue
			}
			visit(ns)
		}
		if failed != nil {
			failed = fmt.Errorf("%d network namespaces not entered, the first: %w", refused, failed)
		}
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			// Still locked: the thread ends with this goroutine.
			done <- errors.Join(failed, fmt.Errorf("back to own network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- failed
	}()
	return <-done
}

// enter moves the calling thread into ns through the first of its paths
// that still refers to it: a pid may have exited and been reused since
// the listing, so the inode is checked on the open file.
func enter(ns Namespace) error {
	for _, path := range ns.paths {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Ino != ns.Inode {
			f.Close()
			continue
		}
		err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
		f.Close()
		return err
	}
	return errGone
}
