package replicate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/notifytargets"
)

// sizedSource is a Source whose every version has size bytes, read back
// from "the drives" (no snapshot); it counts the bodies open at once.
type sizedSource struct {
	size       int64
	open, most atomic.Int32
}

func (s *sizedSource) Config(context.Context, string) (*Config, error) { return nil, nil }
func (s *sizedSource) SetStatus(context.Context, string, string, string, string) error {
	return nil
}
func (s *sizedSource) FromSnapshot(string, string, *Snapshot) (*Version, error) {
	return nil, fmt.Errorf("no snapshots here")
}
func (s *sizedSource) MaxPut() int64 { return 5 << 30 }
func (s *sizedSource) Open(_ context.Context, _, _, versionID string, withBody bool) (*Version, error) {
	v := &Version{VersionID: versionID, Size: s.size, StatusFollowsEvent: true}
	if withBody {
		n := s.open.Add(1)
		for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
		}
		v.Body = &countedBody{Reader: bytes.NewReader(make([]byte, s.size)), open: &s.open}
	}
	return v, nil
}

type countedBody struct {
	io.Reader
	open   *atomic.Int32
	closed sync.Once
}

func (b *countedBody) Close() error { b.closed.Do(func() { b.open.Add(-1) }); return nil }

// TestLargeCopiesAreBounded: a remote runs RemoteLanes copies at once, but
// copies that stream a version larger than a server keeps inline from the
// drives run LargeCopies at once in the process, half of them at most to
// one remote, each waiting for its slot before it opens the version (an
// open body reads at once): two remotes of one set, 32 copies each, have
// at most 4 requests each and 8 bodies open in all. An event that gave a
// small size for what is large by the time it is copied (an unversioned
// key written again) is bounded too, once its body is open (the rare
// case pays for the wait with the body's buffers); small copies are not
// held back.
func TestLargeCopiesAreBounded(t *testing.T) {
	for _, c := range []struct {
		name            string
		size, eventSize int64
		most, min       int // requests in flight at one remote
	}{
		{"1 MiB versions", 1 << 20, 1 << 20, LargeCopies / 2, 2},
		{"1 MiB versions whose events said 4 KiB", 1 << 20, 4 << 10, LargeCopies / 2, 2},
		{"4 KiB versions", 4 << 10, 4 << 10, RemoteLanes, LargeCopies + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := &sizedSource{size: c.size}
			rs := NewRemotes("us-east-1", nil)
			rs.Bind(src)
			var wg sync.WaitGroup
			var mosts []*atomic.Int32
			for d := range 2 {
				var inFlight, most atomic.Int32
				mosts = append(mosts, &most)
				dst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n := inFlight.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					_, _ = io.Copy(io.Discard, r.Body)
					time.Sleep(50 * time.Millisecond)
					inFlight.Add(-1)
				}))
				defer dst.Close()
				r, err := rs.Open(notifytargets.Target{ID: fmt.Sprintf("dr%d", d), Type: "s3", Endpoint: dst.URL, Username: "k", Password: "s"})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				for i := range RemoteLanes {
					wg.Go(func() {
						ev := event{name: "s3:ObjectCreated:Put", bucket: "src", key: fmt.Sprintf("k%02d", i), versionID: "v1", at: time.Now(), size: c.eventSize}
						if _, err := r.copyVersion(t.Context(), ev, &Rule{Enabled: true, Bucket: "dst"}); err != nil {
							t.Error(err)
						}
					})
				}
			}
			wg.Wait()
			t.Logf("%d copies to each of 2 remotes: at most %d and %d in flight, %d bodies open at once", RemoteLanes, mosts[0].Load(), mosts[1].Load(), src.most.Load())
			for i, m := range mosts {
				if most := int(m.Load()); most > c.most || most < c.min {
					t.Errorf("remote %d: %d copies in flight at most, want %d to %d", i, most, c.min, c.most)
				}
			}
			if c.eventSize > largeCopyFloor && src.most.Load() > LargeCopies {
				t.Errorf("%d large bodies open at once, more than %d", src.most.Load(), LargeCopies)
			}
			if src.open.Load() != 0 {
				t.Errorf("%d bodies left open", src.open.Load())
			}
		})
	}
}

// TestALargeCopyWaitingForItsSlotEnds: a copy waiting for a large-copy
// slot ends with its context, holding none.
func TestALargeCopyWaitingForItsSlotEnds(t *testing.T) {
	rs := NewRemotes("us-east-1", nil)
	rs.Bind(&sizedSource{size: 1 << 20})
	r, err := rs.Open(notifytargets.Target{ID: "dr", Type: "s3", Endpoint: "http://127.0.0.1:1", Username: "k", Password: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for range LargeCopies / 2 {
		if _, err := r.largeSlot(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = r.copyVersion(ctx, event{name: "s3:ObjectCreated:Put", bucket: "src", key: "k", versionID: "v1", size: 1 << 20}, &Rule{Enabled: true, Bucket: "dst"})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("copy without a slot: %v, want its context's end", err)
	}
	if len(r.mine) != LargeCopies/2 || len(r.large) != LargeCopies/2 {
		t.Fatalf("slots held after the wait: remote %d, process %d; want %d each", len(r.mine), len(r.large), LargeCopies/2)
	}
}
