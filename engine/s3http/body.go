package s3http

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// ErrBodyTooSlow is what reading a request body returns once the body has
// arrived slower than Limits.MinBodyRate (after Limits.BodyGrace). The
// connection is closed after the response.
var ErrBodyTooSlow = errors.New("s3http: request body arrived too slowly")

// minBodyWait is the shortest read deadline the body guard sets, so a read
// is never failed by scheduling noise when the allowance left is tiny.
const minBodyWait = 100 * time.Millisecond

// readDeadliner is the part of net/http's ResponseWriter that sets the
// connection's read deadline (what http.ResponseController calls, asserted
// directly to spare an allocation per request).
type readDeadliner interface {
	SetReadDeadline(time.Time) error
}

// rateBody is a request body that must keep arriving at a minimum average
// rate. Before each read it sets the connection's read deadline to what is
// left of the client's allowance: grace + (bytes so far + 1)/rate, less the
// time already spent waiting for the client in earlier reads. Time the
// handler spends between reads (writing to drives, waiting for a quorum)
// is not the client's and is not charged to it.
type rateBody struct {
	src       io.ReadCloser
	deadliner readDeadliner
	rate      int64
	grace     time.Duration
	// length is the declared length, -1 when chunked.
	length int64
	read   int64
	waited time.Duration
	// done is io.EOF or ErrBodyTooSlow once reached; reads after it touch
	// neither the connection nor its deadline.
	done     error
	tooSlow  atomic.Bool
	counters *counters
}

// bodyAllowance is how much longer a client may keep us waiting for the
// next byte of a body, having sent read bytes while we waited waited.
func bodyAllowance(grace time.Duration, rate, read int64, waited time.Duration) time.Duration {
	const maxSeconds = 1 << 32 // keeps the Duration arithmetic from overflowing
	sec := (read + 1) / rate
	if sec >= maxSeconds {
		return time.Duration(maxSeconds) * time.Second
	}
	frac := (read + 1) % rate
	return grace + time.Duration(sec)*time.Second + time.Duration(frac)*time.Second/time.Duration(rate) - waited
}

// Read reads from the body under the rate's deadline.
func (b *rateBody) Read(p []byte) (int, error) {
	if b.done != nil {
		return 0, b.done
	}
	// With the declared length read, the next read answers EOF without
	// touching the connection, and net/http has already started its
	// background read to notice a disconnect: a deadline set now would cut
	// that read off and cancel the request.
	if len(p) == 0 || (b.length >= 0 && b.read >= b.length) {
		return b.src.Read(p)
	}
	start := time.Now()
	allowance := bodyAllowance(b.grace, b.rate, b.read, b.waited)
	if allowance <= 0 {
		return 0, b.fail()
	}
	// Setting a deadline fails only on a closed connection, and then the
	// read below fails too.
	_ = b.deadliner.SetReadDeadline(start.Add(max(allowance, minBodyWait)))
	n, err := b.src.Read(p)
	b.waited += time.Since(start)
	b.read += int64(n)
	switch {
	case err == nil:
	case err == io.EOF:
		b.done = io.EOF
	case errors.Is(err, os.ErrDeadlineExceeded):
		return n, b.fail()
	}
	return n, err
}

func (b *rateBody) fail() error {
	if !b.tooSlow.Swap(true) {
		b.counters.slowBodies.Add(1)
	}
	b.done = ErrBodyTooSlow
	return ErrBodyTooSlow
}

// Close closes the underlying body.
func (b *rateBody) Close() error { return b.src.Close() }
