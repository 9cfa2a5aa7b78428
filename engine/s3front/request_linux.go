package s3front

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawConn is the socket under conn (TLS and other wrappers unwrapped).
func rawConn(conn net.Conn) (syscall.RawConn, bool) {
	for {
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = u.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, false
	}
	raw, err := sc.SyscallConn()
	return raw, err == nil
}

// watchable reports whether clientGone can look at conn.
func watchable(conn net.Conn) bool {
	_, ok := rawConn(conn)
	return ok
}

// clientGone reports whether the peer of conn has closed or reset it,
// without reading from it (the HTTP server owns the reads): poll for a
// hang-up with no timeout. A closed socket counts as gone.
func clientGone(conn net.Conn) bool {
	raw, ok := rawConn(conn)
	if !ok {
		return false
	}
	gone := false
	err := raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		n, err := unix.Poll(fds, 0)
		gone = err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
	})
	return gone || err != nil
}
