package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/cluster"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/internal/testcerts"
	"github.com/strata-storage/strata/engine/s3api"
)

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startTLSServer runs a one-node cluster (drives named by URL, so the
// internode service runs, over TLS) on certsDir, checking the certificate
// files every 50 ms, and returns its S3 address.
func startTLSServer(t *testing.T, certsDir string) string {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	drives := t.TempDir()
	topo := cluster.Topology{Version: cluster.TopologyVersion, Pools: []cluster.PoolSpec{{
		Name: "pool-0", Endpoints: []string{fmt.Sprintf("https://%s%s/d{1...4}", addr, drives)}, State: cluster.PoolActive,
	}}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Address: addr, Topology: topo, InternodePort: freePort(t), NoSync: true, CertsDir: certsDir,
			CertsReloadInterval: 50 * time.Millisecond, Root: iam.Credentials{AccessKey: "root", SecretKey: "rootsecret"},
			Healer: erasure.DefaultHealerOptions, StaleUploadAge: time.Hour, MonitorInterval: time.Hour,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return addr
}

// TestAdminTLSFollowsRotation: GET tls reports the S3 leaf, the internode
// leaf and ca.crt as the server loaded them, and, once the files are
// replaced by another CA's, the new ones, without a restart.
func TestAdminTLSFollowsRotation(t *testing.T) {
	certs, next := t.TempDir(), t.TempDir()
	testcerts.Write(t, certs)
	testcerts.Write(t, next)
	addr := startTLSServer(t, certs)
	ask := testcerts.AskTLS(t, addr, "root", "rootsecret", certs, next)
	testcerts.WaitTLS(t, ask, certs, true)
	testcerts.Replace(t, next, certs)
	loaded := testcerts.WaitTLS(t, ask, next, true)

	// Files that do not load (a certificate without its key, a bundle cut
	// short) are not what the listeners hold: the answer stays.
	testcerts.Break(t, certs)
	time.Sleep(10 * 50 * time.Millisecond)
	if got, err := ask(); err != nil || !reflect.DeepEqual(got, loaded) {
		t.Fatalf("after files that do not load: %+v (%v), want what was loaded before, %+v", got, err, loaded)
	}
}

// TestTLSWithoutCertificates: a node without --certs-dir reports nothing.
func TestTLSWithoutCertificates(t *testing.T) {
	n := &Node{served: &s3api.ServedCertificate{}, trust: trusted(Config{}, nil)}
	if got := n.TLS(); !reflect.DeepEqual(got, adminapi.TLSInfo{}) {
		t.Fatalf("TLS() = %+v, want nothing", got)
	}
}
