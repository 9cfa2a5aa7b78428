package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// silentAddress is a loopback address that takes no connection: a socket
// listening with a backlog of 0 whose queue is full, so the kernel drops
// the SYN of every further connection (no answer and no refusal, as from
// a node that is gone). close empties it, freeing the port.
func silentAddress(t *testing.T) (addr string, close func()) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	var queued []net.Conn
	var once sync.Once
	close = func() {
		once.Do(func() {
			for _, c := range queued {
				_ = c.Close()
			}
			_ = syscall.Close(fd)
		})
	}
	t.Cleanup(close)
	for {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			return addr, close // the queue is full: this one had no answer
		}
		if queued = append(queued, c); len(queued) > 8 {
			t.Fatal("the listening socket's queue never filled")
		}
	}
}

// TestUnreachableTenantHeldBack: a call to an address that takes no
// connection waits out its timeout holdAfter times; then calls to it, admin API and
// S3 alike, fail at once with ErrUnreachable (the operator's workers are
// not held by a tenant that is gone) until the cooldown ends, after which
// a call tries again and the address answering ends the hold. An address
// that takes the connection but answers too late, or refuses, is never
// held.
func TestUnreachableTenantHeldBack(t *testing.T) {
	const timeout, cooldown = 400 * time.Millisecond, 2 * time.Second
	c := HTTPClient{Timeout: timeout, Cooldown: cooldown}
	addr, closeSilent := silentAddress(t)
	ep := Endpoint{URL: "http://" + addr, AccessKey: "root", SecretKey: "secret"}
	ctx := context.Background()

	for i := range holdAfter {
		start := time.Now()
		if _, err := c.Info(ctx, ep); err == nil || errors.Is(err, ErrUnreachable) {
			t.Fatalf("call %d: %v, want its own timeout", i, err)
		}
		if took := time.Since(start); took < timeout {
			t.Fatalf("call %d took %s, less than its timeout: the address answered", i, took)
		}
	}
	heldAt := time.Now()
	start := time.Now()
	_, err := c.Info(ctx, ep)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("call %d: %v, want ErrUnreachable", holdAfter, err)
	}
	err = c.EnsureBuckets(ctx, ep, []Bucket{{Name: "a"}, {Name: "b"}})
	if !errors.Is(err, ErrUnreachable) || !tenantWide(err) {
		t.Fatalf("buckets: %v, want ErrUnreachable, tenant-wide", err)
	}
	if me := (*retry.MaxAttemptsError)(nil); errors.As(err, &me) {
		t.Fatalf("the SDK tried a held address again: %v", err)
	}
	if took := time.Since(start); took > timeout/2 {
		t.Fatalf("calls to a held address took %s", took)
	}
	t.Logf("held: %v", err)

	// After the cooldown one call tries again; still no connection: held
	// again at once.
	time.Sleep(time.Until(heldAt.Add(cooldown + 100*time.Millisecond)))
	if _, err := c.Info(ctx, ep); err == nil || errors.Is(err, ErrUnreachable) {
		t.Fatalf("the probe after the cooldown: %v, want its own timeout", err)
	}
	heldAt = time.Now()
	if _, err := c.Info(ctx, ep); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("after a probe that missed: %v, want ErrUnreachable", err)
	}

	// The tenant comes back on the same address.
	closeSilent()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"version":"v","capacity":{"usableBytes":7}}`))
	}))
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	if _, err := c.Info(ctx, ep); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("within the cooldown: %v, want ErrUnreachable", err)
	}
	time.Sleep(time.Until(heldAt.Add(cooldown + 100*time.Millisecond)))
	info, err := c.Info(ctx, ep)
	if err != nil || info.Capacity.UsableBytes != 7 {
		t.Fatalf("after the cooldown: %+v, %v", info, err)
	}

	// Connected, but no answer in time (a slow tenant): no hold.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * timeout):
		}
	}))
	defer slow.Close()
	for i := range holdAfter + 1 {
		if _, err := c.Info(ctx, Endpoint{URL: slow.URL}); err == nil || errors.Is(err, ErrUnreachable) {
			t.Fatalf("call %d to a slow tenant: %v, want its own timeout", i, err)
		}
	}

	// Refused: no hold.
	refusing := httptest.NewServer(http.NotFoundHandler())
	refused := Endpoint{URL: refusing.URL}
	refusing.Close()
	for i := range 2 {
		if _, err := c.Info(ctx, refused); err == nil || errors.Is(err, ErrUnreachable) {
			t.Fatalf("call %d to a closed port: %v, want its refusal", i, err)
		}
	}
}
