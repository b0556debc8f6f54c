package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/http"

	"golang.org/x/sys/unix"
)

// Who asked: the socket's peer credentials (SO_PEERCRED), read once per
// connection, so that every request that changes state (a capture, a
// counters window, a stored bench run) is logged with the uid and pid of
// the process that sent it. Reads are not logged: they are most requests
// and change nothing.

type peerKey struct{}

// peerCred is the process at the other end of a unix socket connection.
type peerCred struct {
	ok            bool
	pid, uid, gid int
}

// withPeerCred is the http.Server's ConnContext: it reads the peer's
// credentials when a unix socket connection is accepted.
func withPeerCred(ctx context.Context, c net.Conn) context.Context {
	var cred peerCred
	if uc, ok := c.(*net.UnixConn); ok {
		if raw, err := uc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				if u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					cred = peerCred{ok: true, pid: int(u.Pid), uid: int(u.Uid), gid: int(u.Gid)}
				}
			})
		}
	}
	return context.WithValue(ctx, peerKey{}, cred)
}

// auditChanges logs each request that is not a GET or HEAD with who sent
// it, then serves it.
func auditChanges(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			attrs := []any{"method", r.Method, "path", r.URL.Path}
			if cred, _ := r.Context().Value(peerKey{}).(peerCred); cred.ok {
				attrs = append(attrs, "uid", cred.uid, "gid", cred.gid, "pid", cred.pid)
			}
			log.Info("api request that changes state", attrs...)
		}
		next.ServeHTTP(w, r)
	})
}
