package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"
)

// checkSocketFree fails if a daemon answers on path, and removes a stale
// socket file left by one that died.
func checkSocketFree(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: socket %s: %w", ErrBadConfig, path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%w: socket path %s exists and is not a socket", ErrBadConfig, path)
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("%w: %s answers", ErrSocketInUse, path)
	}
	return os.Remove(path)
}

// listen creates the API socket with mode 0660, owned by group if it exists
// (the systemd unit's group), so only root and that group can talk to us.
func listen(path, group string) (net.Listener, error) {
	old := syscall.Umask(0o117)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, err
	}
	if group != "" {
		if g, err := user.LookupGroup(group); err == nil {
			gid, _ := strconv.Atoi(g.Gid)
			if err := os.Chown(path, -1, gid); err != nil {
				ln.Close()
				return nil, fmt.Errorf("chown socket to group %s: %w", group, err)
			}
		}
	}
	return ln, nil
}
