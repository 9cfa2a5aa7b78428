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
// same while the address stays unreachable (no cause, which differs from
// call to call): it ends up in status conditions, which a new text would
// write again.
type unreachableError struct {
	host  string
	since time.Time
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("%s: %s has taken no connection within a call's time since %s; tried again after a cooldown",
		ErrUnreachable, e.host, e.since.UTC().Format(time.RFC3339))
}

func (e *unreachableError) Is(target error) bool { return target == ErrUnreachable }

// RetryableError tells the AWS SDK's retryer not to try again: the call
// was not sent, and would not be until the hold ends.
func (e *unreachableError) RetryableError() bool { return false }

// hostState is what the operator knows of an address that took no
// connection.
type hostState struct {
	// since: the first miss in a row; last: the latest; until: the end
	// of the hold.
	since, last, until time.Time
	// misses are the calls in a row that dialled and made no connection.
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

// dialing follows a call's dials: whether one began, and whether one
// made a connection (several may run at once for an address with many
// IPs). A call on a kept connection dials nothing, and says nothing of
// whether the address takes connections.
type dialing struct {
	started, connected atomic.Bool
}

func (d *dialing) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		ConnectStart: func(string, string) { d.started.Store(true) },
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				d.connected.Store(true)
			}
		},
	})
}

func (t holdingTransport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	host := req.URL.Host
	probe, err := admit(host, time.Now())
	if err != nil {
		return nil, err
	}
	var d dialing
	// Deferred: a probe that panics must not leave the address held for
	// good.
	defer func() {
		now := time.Now()
		missed := !d.connected.Load() && d.started.Load() && noConnection(req.Context(), err, now)
		settle(host, probe, d.connected.Load(), missed, t.cooldown, now)
	}()
	return t.base.RoundTrip(req.WithContext(d.trace(req.Context())))
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
		return false, &unreachableError{host: host, since: st.since}
	}
	st.probing = true
	return true, nil
}

// settle records how a call to host ended: a connection made forgets the
// address; a dial that made none in the call's time (missed) counts a
// miss, and from the holdAfter'th in a row (none older than cooldown
// before the next) holds the address for cooldown. Addresses not missed
// for ten cooldowns are forgotten (tenants deleted meanwhile).
func settle(host string, probe, connected, missed bool, cooldown time.Duration, now time.Time) {
	unreachableHosts.Lock()
	defer unreachableHosts.Unlock()
	st := unreachableHosts.m[host]
	if probe && st != nil {
		st.probing = false
	}
	switch {
	case connected:
		delete(unreachableHosts.m, host)
	case missed:
		// Misses not yet held start over when the last is a cooldown
		// old; a held address's probe that misses holds it again at once.
		if st == nil || st.misses < holdAfter && now.Sub(st.last) > cooldown {
			st = &hostState{since: now}
			unreachableHosts.m[host] = st
		}
		st.misses++
		st.last = now
		if st.misses >= holdAfter {
			st.until = now.Add(cooldown)
		}
		for h, other := range unreachableHosts.m {
			if now.Sub(other.last) > 10*cooldown && !other.probing {
				delete(unreachableHosts.m, h)
			}
		}
	}
}

// noConnection reports whether err is a call's time running out, or a
// dial's: with a dial begun and no connection made (the caller checks
// that), the address did not answer in that time. (http.Client cancels a
// call whose Timeout passed through the request's Cancel channel as well
// as its context, so the context may not have ended yet: its deadline is
// what counts.)
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
