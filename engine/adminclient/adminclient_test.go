package adminclient

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/strata-storage/strata/engine/health"
)

// TestDialAndServerName reaches a server through a dialer of the caller's
// and verifies its certificate under a name the URL does not carry.
func TestDialAndServerName(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != health.PathReady {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dialed := ""
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = addr
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}
	// httptest's certificate names example.com and 127.0.0.1, not the
	// host of this URL, which resolves nowhere.
	c, err := New("https://pod.invalid:9000", Options{CA: ca, ServerName: "example.com", DialContext: dial})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(context.Background()); err != nil {
		t.Fatalf("with the dialer and server name: %v", err)
	}
	if dialed != "pod.invalid:9000" {
		t.Errorf("dialed %q, want the URL's address", dialed)
	}
	c, err = New("https://pod.invalid:9000", Options{CA: ca, ServerName: "other.example", DialContext: dial})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(context.Background()); err == nil {
		t.Error("a certificate that does not name ServerName was accepted")
	}
}
