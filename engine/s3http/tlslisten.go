package s3http

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"time"
)

// tlsListener does each TLS handshake in its own goroutine, under its own
// deadline, and hands net/http only connections whose handshake is done.
// net/http would do the handshake in the connection's goroutine under the
// smallest of its read timeouts; doing it here keeps the handshake's
// deadline apart from the header's and lets the tracker see handshaking
// connections (and shed them first).
type tlsListener struct {
	*acceptor
	config  *tls.Config
	timeout time.Duration
	// ready carries handshaken connections to Accept.
	ready chan *tls.Conn
	// failed carries the error that stopped the accept loop.
	failed chan error
	// ctx ends pending handshakes when the listener closes.
	ctx    context.Context
	cancel context.CancelFunc
}

func newTLSListener(a *acceptor, config *tls.Config, timeout time.Duration) *tlsListener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &tlsListener{
		acceptor: a,
		config:   http1Only(config),
		timeout:  timeout,
		ready:    make(chan *tls.Conn),
		failed:   make(chan error, 1),
		ctx:      ctx,
		cancel:   cancel,
	}
	go l.acceptLoop()
	return l
}

// http1Only keeps ALPN from agreeing on h2: this server speaks HTTP/1.1
// only (its connection phases are per request), and net/http drops a
// connection whose negotiated protocol it has no handler for. The caller's
// GetCertificate (certificate reloading) is kept.
func http1Only(c *tls.Config) *tls.Config {
	c = c.Clone()
	c.NextProtos = []string{"http/1.1"}
	if get := c.GetConfigForClient; get != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cc, err := get(hello)
			if cc == nil || err != nil {
				return cc, err
			}
			cc = cc.Clone()
			cc.NextProtos = []string{"http/1.1"}
			return cc, nil
		}
	}
	return c
}

// acceptLoop accepts until the listener fails. It retries errors net/http
// would retry (net/http's own retrying sees only this loop's fate, through
// Accept).
func (l *tlsListener) acceptLoop() {
	var backoff time.Duration
	for {
		tc, err := l.accept(phaseHandshaking)
		if err != nil {
			if temporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				l.log.Warn("s3http: accept failed; retrying", "err", err, "retry_in", backoff)
				if l.sleep(backoff) {
					continue
				}
				err = net.ErrClosed
			}
			l.failed <- err
			return
		}
		backoff = 0
		go l.handshake(tc)
	}
}

// handshake completes the TLS handshake of one connection and passes it
// on, or closes it.
func (l *tlsListener) handshake(tc *trackedConn) {
	tc.underTLS = true
	conn := tls.Server(tc, l.config)
	if l.timeout > 0 {
		// No handshake without its deadline (this fails only on a closed
		// connection, whose handshake would fail the same way).
		if err := tc.Conn.SetDeadline(time.Now().Add(l.timeout)); err != nil {
			l.handshakeFailed(tc, err)
			return
		}
	}
	if err := conn.HandshakeContext(l.ctx); err != nil {
		l.handshakeFailed(tc, err)
		return
	}
	// Fails only on a closed connection, which net/http finds out about on
	// its first read.
	_ = tc.Conn.SetDeadline(time.Time{})
	l.conns.move(tc, phaseAwaitingHeader)
	select {
	case l.ready <- conn:
	case <-l.done:
		tc.Close()
	}
}

func (l *tlsListener) handshakeFailed(tc *trackedConn, err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		l.conns.counters.handshakeTimeouts.Add(1)
	} else {
		l.conns.counters.handshakeErrors.Add(1)
	}
	// A plain HTTP request sent to the TLS port gets a readable answer,
	// as net/http would give it.
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && rh.Conn != nil && looksLikeHTTP(rh.RecordHeader) {
		// Best effort: the connection is closed next whether the answer
		// got out or not.
		_ = tc.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(tc.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
	}
	l.log.Debug("s3http: TLS handshake failed", "client", tc.client, "err", err)
	tc.Close()
}

func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET":
		return true
	}
	return false
}

// Accept returns the next handshaken connection.
func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return newExpectConn(c), nil
	case err := <-l.failed:
		l.failed <- err // later calls see it too
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and abandons handshakes in progress.
func (l *tlsListener) Close() error {
	l.cancel()
	return l.close()
}

// Addr is the listening address.
func (l *tlsListener) Addr() net.Addr { return l.inner.Addr() }
