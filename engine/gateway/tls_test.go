package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/internal/testcerts"
)

// TestAdminTLSFollowsRotation: a gateway's GET tls reports the S3 leaf it
// serves and ca.crt as it last read it (no internode leaf), and the new
// ones once the files are replaced by another CA's, without a restart.
func TestAdminTLSFollowsRotation(t *testing.T) {
	// The posix backend changes the working directory: put it back after.
	t.Chdir(".")
	certs, next := t.TempDir(), t.TempDir()
	testcerts.Write(t, certs)
	testcerts.Write(t, next)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Address: addr, Root: t.TempDir(), Metadata: MetadataAuto, CertsDir: certs, CertsReloadInterval: 50 * time.Millisecond,
			RootUser: iam.Credentials{AccessKey: "root", SecretKey: "rootsecret"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	ask := testcerts.AskTLS(t, addr, "root", "rootsecret", certs, next)
	testcerts.WaitTLS(t, ask, certs, false)
	testcerts.Replace(t, next, certs)
	testcerts.WaitTLS(t, ask, next, false)
}
