package main

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestProxySkipsAnEndpointThatRefuses: of a Service's two ready endpoints,
// one refuses connections (its process died; the node's loss has not
// marked it not ready yet). Every connection through the proxy reaches the
// other, as kube-proxy's userspace mode did, and only the first one dials
// the dead endpoint: later ones pass it over for the fail window, then try
// it again once the window is over.
func TestProxySkipsAnEndpointThatRefuses(t *testing.T) {
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	go func() {
		for {
			c, err := live.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("live"))
			c.Close()
		}
	}()
	// A socket bound to a port and not listening: connections to it are
	// refused, and no other process can take the port while the test runs
	// (a listener's port, closed, could be taken by a server started
	// meanwhile, which then answered in the dead endpoint's place).
	dead, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dead)
	if err := syscall.Bind(dead, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	bound, err := syscall.Getsockname(dead)
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(bound.(*syscall.SockaddrInet4).Port))

	port := func(addr string) (string, int32) {
		h, p, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		return h, int32(n)
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i, addr := range []string{deadAddr, live.Addr().String()} {
		host, p := port(addr)
		_ = idx.Add(&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "s3-" + strconv.Itoa(i), Labels: map[string]string{discoveryv1.LabelServiceName: "s3"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("s3"), Port: ptr.To(p)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		})
	}
	var logs lockedBuffer
	p := newServiceProxy(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		nil, discoverylisters.NewEndpointSliceLister(idx))
	connect := func(n int) {
		for i := range n {
			client, server := net.Pipe()
			go p.forward(server, "ns", "s3", corev1.ServicePort{Name: "s3"})
			got, _ := io.ReadAll(client)
			client.Close()
			if string(got) != "live" {
				t.Fatalf("connection %d: read %q, want the live endpoint's answer", i, got)
			}
		}
	}
	deadDials := func() int { return strings.Count(logs.String(), "endpoint="+deadAddr) }
	connect(6)
	if n := deadDials(); n != 1 {
		t.Fatalf("6 connections dialed the dead endpoint %d times, want once (then passed over for %s):\n%s", n, p.failWindow, logs.String())
	}
	p.failMu.Lock()
	p.failed[deadAddr] = time.Now() // the window is over
	p.failMu.Unlock()
	connect(2)
	if n := deadDials(); n != 2 {
		t.Fatalf("after the fail window, 2 connections dialed the dead endpoint %d times in all, want 2 (tried again once)", n)
	}
}

// lockedBuffer is a bytes.Buffer for a logger that goroutines share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
