package s3http

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// acceptor accepts connections and admits them to the tracker, shedding
// when the server is full or the process is out of descriptors. It is the
// one place connections enter, for plain and TLS listeners alike.
type acceptor struct {
	inner net.Listener
	conns *tracker
	log   *slog.Logger
	// done is closed by close; it stops back-off waits.
	done      chan struct{}
	closeOnce sync.Once
}

func newAcceptor(inner net.Listener, conns *tracker, log *slog.Logger) *acceptor {
	return &acceptor{inner: inner, conns: conns, log: log, done: make(chan struct{})}
}

// Back-off while accept has no descriptor and nothing can be shed (every
// connection is being served): the client waits in the kernel's backlog
// until a request finishes, rather than being refused.
const (
	exhaustedBackoffMin = 5 * time.Millisecond
	exhaustedBackoffMax = 200 * time.Millisecond
)

// accept returns the next admitted connection, in phase p.
func (a *acceptor) accept(p connPhase) (*trackedConn, error) {
	var backoff time.Duration
	for {
		c, err := a.inner.Accept()
		if err != nil {
			if !descriptorsExhausted(err) {
				return nil, err
			}
			// Sleeping here, as net/http does, would leave the flood that
			// exhausted us in place; closing its oldest member frees a
			// descriptor for the connection at the head of the backlog.
			if a.conns.shedOne() {
				backoff = 0
				continue
			}
			if backoff == 0 {
				a.log.Warn("s3http: out of file descriptors with every connection serving; new connections wait in the backlog")
			}
			backoff = min(max(2*backoff, exhaustedBackoffMin), exhaustedBackoffMax)
			if !a.sleep(backoff) {
				return nil, net.ErrClosed
			}
			continue
		}
		backoff = 0
		tc := newTrackedConn(c, a.conns)
		if !a.conns.admit(tc, p) {
			c.Close()
			continue
		}
		return tc, nil
	}
}

// sleep waits for d, or reports false if the acceptor closes first.
func (a *acceptor) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.done:
		return false
	}
}

func (a *acceptor) close() error {
	var err error
	a.closeOnce.Do(func() {
		close(a.done)
		err = a.inner.Close()
	})
	return err
}

// temporary reports whether an accept error is worth retrying, as
// net/http judges it (net.Error's Temporary, deprecated for callers in
// general, is what it still uses for accept).
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// descriptorsExhausted reports whether accept failed for want of a file
// descriptor, in the process (EMFILE) or the system (ENFILE).
func descriptorsExhausted(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

// plainListener hands net/http tracked plain-TCP connections.
type plainListener struct {
	*acceptor
}

// Accept returns the next connection, awaiting its header.
func (l plainListener) Accept() (net.Conn, error) {
	tc, err := l.accept(phaseAwaitingHeader)
	if err != nil {
		return nil, err
	}
	return newExpectConn(tc), nil
}

// Close stops accepting.
func (l plainListener) Close() error { return l.close() }

// Addr is the listening address.
func (l plainListener) Addr() net.Addr { return l.inner.Addr() }
