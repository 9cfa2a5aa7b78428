package erasure

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/vfs"
	"github.com/strata-storage/strata/engine/vfs/faultfs"
)

// faultPool is a pool of one set whose drives each sit behind a faultfs of
// their own, which reaches their metadata store too.
type faultPool struct {
	*Pool
	set    *Set
	fss    []*faultfs.FS
	drives []*drive.Local
	roots  []string
}

func newFaultPool(t *testing.T, n, parity int) *faultPool {
	t.Helper()
	fp := &faultPool{}
	var ds []Drive
	for range n {
		ffs := faultfs.New(vfs.Default)
		root := filepath.Join(t.TempDir(), "d")
		d, err := drive.OpenLocal(root, drive.Options{FS: ffs, MetaFS: errorfs.Wrap(pebblevfs.Default, ffs.MetaInjector()), ShardFiles: testShardFiles()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		fp.fss, fp.drives, fp.roots = append(fp.fss, ffs), append(fp.drives, d), append(fp.roots, root)
		ds = append(ds, d)
	}
	var err error
	if fp.set, err = NewSet(ds, parity); err != nil {
		t.Fatal(err)
	}
	if fp.Pool, err = NewPool(uuid.New(), []*Set{fp.set}); err != nil {
		t.Fatal(err)
	}
	if err := fp.MakeBucket(t.Context(), "bk"); err != nil {
		t.Fatal(err)
	}
	return fp
}

// TestSlowDriveDoesNotHoldUpWrites: one drive of four (2+2, write quorum
// 3) takes 2 s for every write or sync, of its shard files and of its
// metadata store, through the filesystem seam. Streamed PUTs (shard files,
// of known and unknown size), inline PUTs, an overwrite, a delete and a
// delete marker each finish at write quorum instead of waiting for it, and
// read back. Nothing half-written is left on the slow drive, and once it
// is fast again, what it missed is healed onto it: with two other drives
// taken away, everything reads back from it and the fourth. Two modes:
// slow writes and syncs (its shards are left behind while staging), and
// slow syncs only (its shards are staged in time and their commits go on
// in the background).
func TestSlowDriveDoesNotHoldUpWrites(t *testing.T) {
	const slow = 2 * time.Second
	for _, mode := range []struct {
		name string
		ops  []faultfs.Op
	}{
		{"writes and syncs", []faultfs.Op{faultfs.OpWrite, faultfs.OpSync, faultfs.OpSyncDir}},
		{"syncs", []faultfs.Op{faultfs.OpSync, faultfs.OpSyncDir}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			fp := newFaultPool(t, 4, 2)
			h := NewHealer(fp.Pool, HealerOptions{QueueSize: 100, BytesPerSecond: 1 << 30, ScanInterval: time.Hour}, slog.New(slog.DiscardHandler))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go h.Run(ctx)
			for _, op := range mode.ops {
				fp.fss[0].Delay(op, fp.roots[0], slow, -1)
			}

			timed := func(what string, fn func() error) {
				t.Helper()
				start := time.Now()
				if err := fn(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				took := time.Since(start)
				t.Logf("%s: %v", what, took.Round(time.Millisecond))
				if took >= slow {
					t.Fatalf("%s took %v: it waited for the drive that takes %v per write", what, took, slow)
				}
			}
			objs := map[string][]byte{}
			put := func(key string, data []byte, size int64) {
				objs[key] = data
				timed("PUT "+key, func() error {
					_, err := fp.PutObject(t.Context(), "bk", key, bytes.NewReader(data), size, objlayer.PutOptions{})
					return err
				})
			}
			put("streamed", randomBytes(6<<20+3), 6<<20+3)
			put("streamed-unknown-size", randomBytes(2<<20), -1)
			put("one-block", randomBytes(DefaultInlineLimit+1), DefaultInlineLimit+1)
			for _, k := range []string{"small-a", "small-b", "small-c", "gone", "marked"} {
				put(k, randomBytes(1000), 1000)
			}
			put("small-a", randomBytes(2000), 2000) // an overwrite
			timed("DELETE gone", func() error {
				_, err := fp.DeleteObject(t.Context(), "bk", "gone", nil, objlayer.DeleteUnversioned)
				return err
			})
			delete(objs, "gone")
			timed("DELETE marked (a delete marker)", func() error {
				_, err := fp.DeleteObject(t.Context(), "bk", "marked", nil, objlayer.DeleteVersioned)
				return err
			})
			marked := objs["marked"]
			delete(objs, "marked")
			for k, want := range objs {
				if got := getObject(t, fp.Pool, k, nil); !bytes.Equal(got, want) {
					t.Fatalf("%s: wrong bytes while the drive is slow", k)
				}
			}

			// The drive is fast again: what was left running on it ends,
			// and what it missed is healed.
			fp.fss[0].Reset()
			waitUntil(t, func() bool {
				st := h.Status()
				return st.WritesBehind == 0 && st.QueueLength == 0 && st.Deferred == 0
			})
			assertWholeShards(t, fp.set, fp.drives[0], fp.roots[0], []string{"streamed", "streamed-unknown-size", "one-block", "small-a", "gone", "marked"})
			fp.set.SetDrive(1, nil)
			fp.set.SetDrive(2, nil)
			for k, want := range objs {
				if got := getObject(t, fp.Pool, k, nil); !bytes.Equal(got, want) {
					t.Fatalf("%s: wrong bytes from the slow drive and one other", k)
				}
			}
			if _, err := fp.drives[0].GetVersion(t.Context(), "bk", "gone", nil); !errors.Is(err, drive.ErrVersionNotFound) {
				t.Fatalf("the slow drive still holds the deleted object: %v", err)
			}
			if r, err := fp.drives[0].GetVersion(t.Context(), "bk", "marked", nil); err != nil || !r.IsDeleteMarker() {
				t.Fatalf("the slow drive misses the delete marker: %+v %v", r, err)
			}
			if got := getObject(t, fp.Pool, "marked", &[16]byte{}); !bytes.Equal(got, marked) {
				t.Fatal("the version under the delete marker: wrong bytes from the slow drive and one other")
			}
		})
	}
}

func getObject(t *testing.T, p *Pool, key string, versionID *[16]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, _, err := p.GetObject(t.Context(), &buf, "bk", key, versionID, 0, -1); err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return buf.Bytes()
}

// assertWholeShards checks that the drive holds nothing staged, that every
// shard in its data area belongs to a version it holds of one of keys and
// is whole, and that each such version has all its shards.
func assertWholeShards(t *testing.T, s *Set, d *drive.Local, root string, keys []string) {
	t.Helper()
	if ents, err := os.ReadDir(filepath.Join(root, ".strata", "tmp")); err != nil || len(ents) > 0 {
		t.Fatalf("staged leftovers on the drive: %v %v", ents, err)
	}
	versions := map[string]*drive.Record{}
	for _, k := range keys {
		recs, err := d.Versions(t.Context(), "bk", k)
		if err != nil && !errors.Is(err, drive.ErrVersionNotFound) {
			t.Fatal(err)
		}
		for _, r := range recs {
			if !r.IsInline() && !r.IsDeleteMarker() && r.Size > 0 {
				versions[hex.EncodeToString(r.DataDir[:])] = r
			}
		}
	}
	// A version's shards are files data/<xx>/<dataDir>.<part> or
	// data/<xx>/<dataDir>/part.<part> (drive.Options.ShardFiles).
	entries, _ := filepath.Glob(filepath.Join(root, ".strata", "data", "*", "*"))
	found := map[string]int{}
	check := func(path, id, part string) {
		rec := versions[id]
		if rec == nil {
			t.Fatalf("shard %s belongs to no version the drive holds", path)
		}
		n, err := strconv.Atoi(part)
		sizes := partSizes(rec)
		if err != nil || n < 1 || n > len(sizes) {
			t.Fatalf("shard %s: no such part of its version", path)
		}
		fi, err := os.Stat(path)
		if want := drive.BitrotSize(s.codec.ShardSize(sizes[n-1]), s.codec.ShardBlockSize()); err != nil || fi.Size() != want {
			t.Fatalf("%s: %v, want %d bytes", path, err, want)
		}
		found[id]++
	}
	for _, e := range entries {
		if id, part, ok := strings.Cut(filepath.Base(e), "."); ok {
			check(e, id, part)
			continue
		}
		parts, _ := os.ReadDir(e)
		for _, p := range parts {
			check(filepath.Join(e, p.Name()), filepath.Base(e), strings.TrimPrefix(p.Name(), "part."))
		}
	}
	for id, rec := range versions {
		if found[id] != len(partSizes(rec)) {
			t.Fatalf("version with data %s: %d of its %d shards on the drive", id, found[id], len(partSizes(rec)))
		}
	}
}

// gateWriter is a drive's shard writer whose writes (or finish) wait for
// a gate: a drive that stalls.
type gateWriter struct {
	blocks, finishing chan struct{} // closed: writes, finish go through
	finished          chan bool     // how it finished: complete or not
	discarded         atomic.Bool
}

func newGateWriter(blocks, finishing bool) *gateWriter {
	g := &gateWriter{blocks: make(chan struct{}), finishing: make(chan struct{}), finished: make(chan bool, 1)}
	if blocks {
		close(g.blocks)
	}
	if finishing {
		close(g.finishing)
	}
	return g
}

func (g *gateWriter) WriteBlock([]byte) error { <-g.blocks; return nil }

func (g *gateWriter) finish(complete bool) error {
	<-g.finishing
	g.finished <- complete
	return nil
}

func (g *gateWriter) discard() { g.discarded.Store(true) }

// TestEncodeLeavesBehindOnlyBeyondWriteQuorum: with two drives of four
// stalled (2+2, write quorum 3) an encode waits, however long, for one of
// them; once one goes on, the other is left behind after the allowance:
// it finishes incomplete, or, stalled in its last flush, discards its
// shard. The set then counts no write behind.
func TestEncodeLeavesBehindOnlyBeyondWriteQuorum(t *testing.T) {
	l, _ := NewLayout(4, 2)
	c, _ := NewCodec(l, 1024)
	data := randomBytes(10_000)
	for _, stalled := range []string{"writing", "finishing"} {
		t.Run(stalled, func(t *testing.T) {
			// Drives 2 and 3 stall, in their writes or in their last flush.
			writing := stalled == "writing"
			g := []*gateWriter{newGateWriter(true, true), newGateWriter(true, true), newGateWriter(!writing, writing), newGateWriter(!writing, writing)}
			release := func(g *gateWriter) {
				if writing {
					close(g.blocks)
				} else {
					close(g.finishing)
				}
			}
			w := &writeWait{lags: newWriteLags(4), quorum: l.WriteQuorum(), start: time.Now()}
			type result struct {
				errs []error
				err  error
			}
			done := make(chan result, 1)
			go func() {
				_, errs, err := c.encode(firstBlock{}, bytes.NewReader(data), []BlockWriter{g[0], g[1], g[2], g[3]}, l.WriteQuorum(), w, []int{0, 1, 2, 3}, nil)
				done <- result{errs, err}
			}()
			select {
			case r := <-done:
				t.Fatalf("the encode ended with two of four drives stalled (below write quorum): %v %v", r.errs, r.err)
			case <-time.After(3 * lagFloor):
			}
			release(g[2])
			r := <-done
			if r.err != nil || r.errs[0] != nil || r.errs[1] != nil || r.errs[2] != nil || !errors.Is(r.errs[3], errLeftBehind) {
				t.Fatalf("want drives 0-2 complete and 3 left behind: %v %v", r.errs, r.err)
			}
			if w.lags.total() != 1 {
				t.Fatalf("%d writes behind, want 1", w.lags.total())
			}
			release(g[3])
			complete := <-g[3].finished
			if writing && complete {
				t.Fatal("a drive left behind mid-shard finished its shard as complete")
			}
			waitUntil(t, func() bool { return w.lags.total() == 0 })
			if !writing && !g[3].discarded.Load() {
				t.Fatal("a shard left behind in its last flush was kept")
			}
		})
	}
}
