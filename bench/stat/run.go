package stat

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
)

// Command runs argv with stdin, stdout and stderr as given. While it
// runs, the measurement goes on until it ends, however it is stopped, as
// perf stat does: SIGTERM and SIGHUP sent to us are passed on to it, and
// ^C (SIGINT, SIGQUIT) is left to the terminal, which sends it to the
// command as well. Its exit code is its own, or 128 plus the signal that
// killed it, as a shell reports it.
func Command(argv []string, stdin io.Reader, stdout, stderr io.Writer) Run {
	return func(ctx context.Context) (func() int, error) {
		if len(argv) == 0 {
			return nil, errors.New("no command to run")
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
		if err := cmd.Start(); err != nil {
			signal.Stop(sigs)
			return nil, fmt.Errorf("start %s: %w", argv[0], unwrapExec(err))
		}
		done := make(chan struct{})
		go func() {
			for {
				select {
				case s := <-sigs:
					if s == syscall.SIGTERM || s == syscall.SIGHUP {
						cmd.Process.Signal(s)
					}
				case <-ctx.Done():
					cmd.Process.Signal(syscall.SIGTERM)
					<-done
					return
				case <-done:
					return
				}
			}
		}()
		return func() int {
			cmd.Wait()
			signal.Stop(sigs)
			close(done)
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return cmd.ProcessState.ExitCode()
		}, nil
	}
}

// unwrapExec drops what exec and fork/exec put in front of the cause:
// "start x: no such file or directory".
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Window measures d of the live system, or until ctx ends.
func Window(d time.Duration) Run {
	return func(ctx context.Context) (func() int, error) {
		return func() int {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
			return -1
		}, nil
	}
}

// KernelReader reads the kernel's counters with collectors.Sweep: every
// program opened, read and closed in turn, no fd kept between readings.
// It needs CAP_SYS_ADMIN, and the counters only move while run-time stats
// are on. Names are full names: the sweep gives the kernel's, cut to 15
// characters, so a program whose name may have been cut has its full name
// read once (collectors.ReadMeta), when its id first appears.
func KernelReader() Reader {
	var buf []collectors.Sample
	names := map[uint32]fullName{}
	return func() ([]Reading, error) {
		var err error
		buf, err = collectors.Sweep(buf[:0])
		var skipped *collectors.SkippedError
		if err != nil && !errors.As(err, &skipped) {
			return nil, err
		}
		out := make([]Reading, 0, len(buf))
		// Only the programs still loaded are kept.
		kept := make(map[uint32]fullName, len(names))
		for _, s := range buf {
			name := s.Name
			if len(s.Name) >= collectors.KernelNameLen {
				n, ok := names[s.ID]
				if !ok || n.tag != s.Tag {
					n = fullName{s.Tag, readFullName(s.ID, s.Tag)}
				}
				if name = n.name; name == "" {
					// Not read: tried again at the next reading.
					name = s.Name
				} else {
					kept[s.ID] = n
				}
			}
			out = append(out, Reading{
				ID: s.ID, Type: collectors.ProgTypeName(s.Type), Name: name, KernelName: s.Name, Tag: fmt.Sprintf("%x", s.Tag),
				Counters: Counters{RunCnt: s.RunCnt, RunTimeNs: s.RunTimeNs, RecursionMisses: s.RecursionMisses},
			})
		}
		names = kept
		return out, nil
	}
}

// fullName is a program's full name, and the tag of the program it was
// read for (an id reused by another program is read again).
type fullName struct {
	tag  [8]byte
	name string
}

// readFullName is program id's full name, or "" where it cannot be read
// (the program is gone, or the id is another program's now).
func readFullName(id uint32, tag [8]byte) string {
	m, err := collectors.ReadMeta(id)
	if err != nil || m.Tag != hex.EncodeToString(tag[:]) {
		return ""
	}
	return m.Name
}
