package admin

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// Failed logins are counted per client address: after maxFailures within
// failureWindow, the address is refused (429) until the window ends,
// without its credentials being checked, so the root secret cannot be
// guessed at network speed. A success clears the address's count.
const (
	maxFailures   = 10
	failureWindow = time.Minute
	// maxTracked bounds the addresses remembered; past it the oldest
	// windows are forgotten first.
	maxTracked = 10000
)

type failures struct {
	count int
	since time.Time
}

type lockout struct {
	mu    sync.Mutex
	by    map[string]*failures
	clock func() time.Time
}

func newLockout() *lockout {
	return &lockout{by: map[string]*failures{}, clock: time.Now}
}

func clientOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// locked reports whether addr is refused now, and for how long.
func (l *lockout) locked(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.by[clientOf(addr)]
	if f == nil {
		return false, 0
	}
	left := failureWindow - l.clock().Sub(f.since)
	if left <= 0 {
		delete(l.by, clientOf(addr))
		return false, 0
	}
	return f.count >= maxFailures, left
}

func (l *lockout) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	key := clientOf(addr)
	f := l.by[key]
	if f == nil || now.Sub(f.since) >= failureWindow {
		if f == nil && len(l.by) >= maxTracked {
			l.forgetOldest()
		}
		f = &failures{since: now}
		l.by[key] = f
	}
	f.count++
}

func (l *lockout) succeeded(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.by, clientOf(addr))
}

func (l *lockout) forgetOldest() {
	var oldest string
	var at time.Time
	for k, f := range l.by {
		if oldest == "" || f.since.Before(at) {
			oldest, at = k, f.since
		}
	}
	delete(l.by, oldest)
}

func retryAfter(d time.Duration) string { return strconv.Itoa(int(d.Seconds()) + 1) }
