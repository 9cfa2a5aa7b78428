package internode

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
)

// TestCallerContextEndsRemoteWork: a drive call whose caller gives up (a
// deadline here; a client gone is the same) returns at once with the
// caller's reason, the peer's handler sees its request end, and the peer
// stays online: the caller going away says nothing about the peer.
func TestCallerContextEndsRemoteWork(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1"))
	var root string
	for r := range n.drives {
		root = r
	}
	served := n.hs.Handler
	handlerEnded := make(chan error, 1)
	n.hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/"+opGetVersion.name) && r.URL.Query().Get("object") == "k" {
			select { // a drive that hangs
			case <-r.Context().Done():
				handlerEnded <- r.Context().Err()
			case <-time.After(10 * time.Second):
				handlerEnded <- errors.New("the handler's request never ended")
			}
			return
		}
		served.ServeHTTP(w, r)
	})
	p := newPeer(t, n, Protocol)
	rd := p.Drive(root)

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := rd.GetVersion(ctx, "bk", "k", nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the call returned %v after its caller's deadline", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	select {
	case err := <-handlerEnded:
		if err == nil || !errors.Is(err, context.Canceled) {
			t.Fatalf("the peer's handler: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the peer kept working on a call its caller gave up")
	}
	if !p.Online() {
		t.Fatal("a caller's deadline marked the peer offline")
	}

	// The framed channel too: a batch asked under an ended context is not
	// sent, and the peer stays online.
	gone, leave := context.WithCancel(t.Context())
	leave()
	_, errs := p.GetVersions(gone, []erasure.GetItem{{Drive: rd, Bucket: "bk", Object: "k"}})
	if !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("framed batch under a cancelled context: %v", errs[0])
	}
	if !p.Online() {
		t.Fatal("a cancelled batch marked the peer offline")
	}
	// And the peer answers the next caller.
	if _, err := rd.GetVersion(t.Context(), "bk", "missing", nil); !errors.Is(err, drive.ErrVersionNotFound) {
		t.Fatalf("after: %v", err)
	}
}
