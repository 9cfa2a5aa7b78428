package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// A tenant whose address takes no connection at all (its node gone, a
// network partition, traffic dropped) makes every call wait out the
// client's timeout, and the SDK then tries again. The operator's workers
// serve every tenant, so a few such calls would hold back the reconciles
// of all the others. So once connections to an address could not be made
// within a call's time holdAfter times in a row, calls to that address
// fail at once for a while (HTTPClient.Cooldown); then one call tries
// again, and the first connection made ends the hold. A tenant that
// answers, however slowly, or that refuses (no pod listening: an answer
// at once) is never held: only a connection that could not be made
// counts. (Twice, not once: a Service's connection can meet one endpoint
// on a node that just died while the others answer.)

// holdAfter is how many calls in a row must make no connection before an
// address is held.
const holdAfter = 2

// ErrUnreachable is the error of a call not tried because the tenant's
// address took no connection a moment ago.
var ErrUnreachable = errors.New("tenant not reachable")

// unreachableError says which address and since when. Its text stays the
// same while the address stays unreachable: it ends up in status
// conditions, which a new text would write again.
type unreachableError struct {
	host  string
	since time.Time
	cause error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("%s: %s has taken no connection since %s (%v); tried again after a cooldown",
		ErrUnreachable, e.host, e.since.UTC().Format(time.RFC3339), e.cause)
}

func (e *unreachableError) Is(target error) bool { return target == ErrUnreachable }

// RetryableError tells the AWS SDK's retryer not to try again: the call
// was not sent, and would not be until the hold ends.
func (e *unreachableError) RetryableError() bool { return false }

// hostState is what the operator knows of an address that took no
// connection.
type hostState struct {
	since, until time.Time
	cause        error
	// misses are the calls in a row that made no connection.
	misses int
	// probing: a call past until is trying the address; the others do
	// not wait for it.
	probing bool
}

// unreachableHosts is every address that took no connection lately, by
// host:port.
var unreachableHosts = struct {
	sync.Mutex
	m map[string]*hostState
}{m: map[string]*hostState{}}

// defaultCooldown is HTTPClient.Cooldown when unset.
const defaultCooldown = 30 * time.Second

// holdingTransport is a transport that does not try an address held as
// unreachable.
type holdingTransport struct {
	base     http.RoundTripper
	cooldown time.Duration
}

func (t holdingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	probe, err := admit(host, time.Now())
	if err != nil {
		return nil, err
	}
	var connected atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }}
	resp, err := t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	now := time.Now()
	settle(host, probe, connected.Load(), noConnection(req.Context(), err, now), err, t.cooldown, now)
	return resp, err
}

// admit reports whether a call to host may go ahead, and whether it is
// the one call trying a held address again.
func admit(host string, now time.Time) (probe bool, err error) {
	unreachableHosts.Lock()
	defer unreachableHosts.Unlock()
	st := unreachableHosts.m[host]
	switch {
	case st == nil || st.misses < holdAfter:
		return false, nil
	case now.Before(st.until) || st.probing:
		return false, &unreachableError{host: host, since: st.since, cause: st.cause}
	}
	st.probing = true
	return true, nil
}

// settle records how a call to host ended: a connection made forgets the
// address; one that could not be made in time counts a miss, and from the
// holdAfter'th in a row holds the address for cooldown.
func settle(host string, probe, connected, timedOut bool, err error, cooldown time.Duration, now time.Time) {
	unreachableHosts.Lock()
	defer unreachableHosts.Unlock()
	st := unreachableHosts.m[host]
	switch {
	case connected:
		delete(unreachableHosts.m, host)
	case err != nil && timedOut:
		if st == nil {
			st = &hostState{since: now}
			unreachableHosts.m[host] = st
		}
		st.misses++
		st.cause, st.probing = err, false
		if st.misses >= holdAfter {
			st.until = now.Add(cooldown)
		}
	case probe && st != nil:
		// Ended otherwise (refused, the caller gave up): the next call
		// tries.
		st.probing = false
	}
}

// noConnection reports whether err is a call's time running out, or a
// dial's: with no connection made (the caller checks that), the address
// did not answer in that time. (http.Client cancels a call whose Timeout
// passed through the request's Cancel channel as well as its context, so
// the context may not have ended yet: its deadline is what counts.)
func noConnection(ctx context.Context, err error, now time.Time) bool {
	if err == nil {
		return false
	}
	if dl, ok := ctx.Deadline(); ok && !now.Before(dl) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
