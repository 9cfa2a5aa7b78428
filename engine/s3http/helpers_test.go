package s3http

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// testServer is a Server running on a loopback port for one test.
type testServer struct {
	*Server
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// startServer runs cfg on 127.0.0.1 until the test ends (or stop).
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	listening := make(chan struct{})
	cfg.OnListen = func() { close(listening) }
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{Server: s, addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- s.Serve(ctx) }()
	<-listening
	t.Cleanup(func() {
		if err := ts.stop(20 * time.Second); err != nil {
			t.Error(err)
		}
	})
	return ts
}

// stop ends Serve's context and waits for it to return.
func (ts *testServer) stop(within time.Duration) error {
	ts.cancel()
	select {
	case err, ok := <-ts.done:
		if ok && err != nil {
			return fmt.Errorf("Serve returned %w", err)
		}
		if ok {
			close(ts.done)
		}
		return nil
	case <-time.After(within):
		return fmt.Errorf("Serve did not return within %v", within)
	}
}

// okHandler answers every S3 request with 200 and its body length.
var okHandler = HandlerFunc(func(w http.ResponseWriter, r *Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "%d", n)
})

// eventually polls cond until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// trickler opens a connection and sends a request header that never ends,
// one byte at a time, noting when the server closes it.
type trickler struct {
	conn   net.Conn
	closed chan struct{}
	once   sync.Once
}

// headerPrefix starts a plausible request so the trickle is a header.
const headerPrefix = "GET /bucket/key HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: "

func dialTrickler(t testing.TB, addr string, every time.Duration) *trickler {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial trickler: %v", err)
	}
	tr := &trickler{conn: conn, closed: make(chan struct{})}
	t.Cleanup(func() { conn.Close() })
	go tr.watch()
	go tr.trickle(every)
	return tr
}

// watch waits for the server to close the connection.
func (tr *trickler) watch() {
	var b [64]byte
	for {
		if _, err := tr.conn.Read(b[:]); err != nil {
			tr.once.Do(func() { close(tr.closed) })
			return
		}
	}
}

func (tr *trickler) trickle(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		b := byte('a')
		if i < len(headerPrefix) {
			b = headerPrefix[i]
		}
		if _, err := tr.conn.Write([]byte{b}); err != nil {
			return
		}
		select {
		case <-tr.closed:
			return
		case <-tick.C:
		}
	}
}

func (tr *trickler) isClosed() bool {
	select {
	case <-tr.closed:
		return true
	default:
		return false
	}
}

// rawRequest sends one request on a new connection, reads the answer and
// returns its status code, leaving the connection open for the caller.
func rawRequest(addr, req string) (_ net.Conn, status int, err error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, 0, err
	}
	if _, err := io.WriteString(conn, req); err != nil {
		return nil, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return nil, 0, err
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, 0, err
	}
	return conn, resp.StatusCode, nil
}

// get makes a GET with client and checks it answers 200.
func get(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// selfSigned makes a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "s3http test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
