package erasure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

type testPool struct {
	*Pool
	roots  []string
	drives []*drive.Local
}

// testShardFiles opens the test pools' drives with shards as files of their
// own (drive.Options.ShardFiles), as `make unit` runs this package once
// more. It is read by the tests, not at the package's start: go test
// caches a result with the environment a test read, and nothing read
// before the tests start is counted.
func testShardFiles() bool { return os.Getenv("STRATA_TEST_SHARD_FILES") != "" }

// newTestPool builds a pool of sets x setSize local drives in temp dirs.
func newTestPool(t testing.TB, sets, setSize, parity int) *testPool {
	t.Helper()
	tp := &testPool{}
	var ss []*Set
	for s := 0; s < sets; s++ {
		var ds []Drive
		for i := 0; i < setSize; i++ {
			root := filepath.Join(t.TempDir(), fmt.Sprintf("d%d", i))
			d, err := drive.OpenLocal(root, drive.Options{ShardFiles: testShardFiles()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			tp.roots = append(tp.roots, root)
			tp.drives = append(tp.drives, d)
			ds = append(ds, d)
		}
		set, err := NewSet(ds, parity)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, set)
	}
	p, err := NewPool(uuid.New(), ss)
	if err != nil {
		t.Fatal(err)
	}
	tp.Pool = p
	if err := p.MakeBucket(t.Context(), "bk"); err != nil {
		t.Fatal(err)
	}
	return tp
}

func (tp *testPool) put(t testing.TB, key string, data []byte) objlayer.ObjectInfo {
	t.Helper()
	info, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader(data), int64(len(data)), objlayer.PutOptions{})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info
}

func (tp *testPool) get(t testing.TB, key string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, _, err := tp.GetObject(t.Context(), &buf, "bk", key, nil, 0, -1); err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return buf.Bytes()
}

func TestPutGetAcrossTheInlineThreshold(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	for _, size := range []int{0, 1, 4096, DefaultInlineLimit, DefaultInlineLimit + 1, 3<<20 + 7} {
		data := randomBytes(size)
		key := fmt.Sprintf("obj-%d", size)
		info := tp.put(t, key, data)
		if info.Size != int64(size) || len(info.ETag) != 32 {
			t.Fatalf("size %d: info %+v", size, info)
		}
		if got := tp.get(t, key); !bytes.Equal(got, data) {
			t.Fatalf("size %d: read back %d bytes that differ", size, len(got))
		}
		if size > 10 {
			var buf bytes.Buffer
			if _, _, err := tp.GetObject(t.Context(), &buf, "bk", key, nil, 3, int64(size)-7); err != nil || !bytes.Equal(buf.Bytes(), data[3:size-4]) {
				t.Fatalf("size %d: range read wrong (%v)", size, err)
			}
		}
		st, err := tp.StatObject(t.Context(), "bk", key, nil)
		if err != nil || st.ETag != info.ETag || st.Size != info.Size {
			t.Fatalf("size %d: stat %+v %v", size, st, err)
		}
	}
	// Unknown size (chunked upload) takes the same paths.
	for _, size := range []int{100, 1 << 20} {
		data := randomBytes(size)
		if _, err := tp.PutObject(t.Context(), "bk", "chunked", bytes.NewReader(data), -1, objlayer.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tp.get(t, "chunked"), data) {
			t.Fatalf("unknown-size object of %d bytes read back wrong", size)
		}
	}
}

func TestShortBodyStoresNothing(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	for _, declared := range []int64{1000, 1 << 20} {
		_, err := tp.PutObject(t.Context(), "bk", "short", bytes.NewReader(make([]byte, 10)), declared, objlayer.PutOptions{})
		if !errors.Is(err, objlayer.ErrIncompleteBody) {
			t.Fatalf("declared %d: err = %v, want ErrIncompleteBody", declared, err)
		}
		if _, err := tp.StatObject(t.Context(), "bk", "short", nil); !errors.Is(err, objlayer.ErrObjectNotFound) {
			t.Fatalf("declared %d: a short PUT left an object: %v", declared, err)
		}
	}
}

func TestOverwriteAndVersions(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	tp.put(t, "k", []byte("one"))
	tp.put(t, "k", randomBytes(300_000))
	last := tp.put(t, "k", []byte("three"))
	if got := tp.get(t, "k"); string(got) != "three" {
		t.Fatalf("after overwrites: %q", got)
	}
	// Every drive keeps only the newest null version.
	for _, d := range tp.drives {
		vs, err := d.Versions(t.Context(), "bk", "k")
		if err != nil || len(vs) != 1 || vs[0].ETag != last.ETag {
			t.Fatalf("drive %s keeps %d versions (%v)", d.Root(), len(vs), err)
		}
	}

	v1, v2 := [16]byte(uuid.New()), [16]byte(uuid.New())
	if _, err := tp.PutObject(t.Context(), "bk", "v", strings.NewReader("first"), 5, objlayer.PutOptions{VersionID: v1}); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.PutObject(t.Context(), "bk", "v", strings.NewReader("second"), 6, objlayer.PutOptions{VersionID: v2}); err != nil {
		t.Fatal(err)
	}
	marker, err := tp.DeleteObject(t.Context(), "bk", "v", nil, objlayer.DeleteVersioned)
	if err != nil || !marker.DeleteMarker {
		t.Fatalf("versioned delete: %+v %v", marker, err)
	}
	if _, _, err := tp.GetObject(t.Context(), io.Discard, "bk", "v", nil, 0, -1); !errors.Is(err, objlayer.ErrObjectNotFound) {
		t.Fatalf("GET after a delete marker: %v", err)
	}
	var buf bytes.Buffer
	if _, _, err := tp.GetObject(t.Context(), &buf, "bk", "v", &v1, 0, -1); err != nil || buf.String() != "first" {
		t.Fatalf("GET of an old version: %q %v", buf.String(), err)
	}
	if _, err := tp.DeleteObject(t.Context(), "bk", "v", &marker.VersionID, objlayer.DeleteVersioned); err != nil {
		t.Fatal(err)
	}
	if got := tp.get(t, "v"); string(got) != "second" {
		t.Fatalf("after removing the delete marker: %q", got)
	}
	if _, err := tp.DeleteObject(t.Context(), "bk", "k", nil, objlayer.DeleteUnversioned); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.StatObject(t.Context(), "bk", "k", nil); !errors.Is(err, objlayer.ErrObjectNotFound) {
		t.Fatalf("unversioned delete left the object: %v", err)
	}
	if _, err := tp.DeleteObject(t.Context(), "bk", "never-was", nil, objlayer.DeleteUnversioned); err != nil {
		t.Fatalf("deleting a missing object must succeed: %v", err)
	}
}

func TestReadsSurviveParityDrivesLostWipedOrCorrupt(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	small, big := randomBytes(4096), randomBytes(2<<20+123)
	tp.put(t, "small", small)
	tp.put(t, "big", big)
	set := tp.Sets()[0]

	// Wipe drive 0's shard files, corrupt every shard file of drive 1.
	if err := os.RemoveAll(filepath.Join(tp.roots[0], ".strata", "data")); err != nil {
		t.Fatal(err)
	}
	corrupted := 0
	_ = filepath.Walk(filepath.Join(tp.roots[1], ".strata", "data"), func(path string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(path)
			b[len(b)/2] ^= 0xff
			corrupted++
			return os.WriteFile(path, b, 0o644)
		}
		return nil
	})
	if corrupted == 0 {
		t.Fatal("no shard file to corrupt")
	}
	var buf bytes.Buffer
	_, bad, err := tp.GetObject(t.Context(), &buf, "bk", "big", nil, 0, -1)
	if err != nil || !bytes.Equal(buf.Bytes(), big) {
		t.Fatalf("big object through a wiped and a corrupt drive: %v", err)
	}
	if len(bad) == 0 {
		t.Error("the wiped/corrupt shards were not reported for healing")
	}

	// Take two drives offline: reads still work, writes need 3 of 4.
	saved := set.Drives()
	offline := func(positions ...int) {
		for pos := range saved {
			set.SetDrive(pos, saved[pos])
		}
		for _, pos := range positions {
			set.SetDrive(pos, nil)
		}
	}
	offline(2, 3)
	if _, err := tp.PutObject(t.Context(), "bk", "lost", bytes.NewReader(small), int64(len(small)), objlayer.PutOptions{}); !errors.Is(err, objlayer.ErrWriteQuorum) {
		t.Fatalf("PUT with 2 of 4 drives: %v, want ErrWriteQuorum", err)
	}
	offline()
	if _, err := tp.StatObject(t.Context(), "bk", "lost", nil); !errors.Is(err, objlayer.ErrObjectNotFound) {
		t.Fatalf("a PUT that failed quorum is visible: %v", err)
	}
	offline(3)
	if got := tp.get(t, "small"); !bytes.Equal(got, small) {
		t.Fatal("small object with one drive offline read back wrong")
	}
	tp.put(t, "one-down", small) // 3 of 4 is write quorum

	// Parity+1 drives gone: a clear quorum error, not wrong bytes.
	offline(0, 1, 2)
	if _, _, err := tp.GetObject(t.Context(), io.Discard, "bk", "big", nil, 0, -1); !errors.Is(err, objlayer.ErrReadQuorum) {
		t.Fatalf("GET with 1 of 4 drives: %v, want ErrReadQuorum", err)
	}
}

func TestListObjects(t *testing.T) {
	tp := newTestPool(t, 2, 4, 2) // two sets: listings merge them
	keys := []string{"a.txt", "docs/1", "docs/2", "docs/sub/3", "photos/2026/x.jpg", "photos/2026/y.jpg", "z"}
	for _, k := range keys {
		tp.put(t, k, []byte(k))
	}
	if _, err := tp.DeleteObject(t.Context(), "bk", "z", nil, objlayer.DeleteSuspended); err != nil { // latest is a delete marker
		t.Fatal(err)
	}
	list := func(prefix, after, delim string, max int) string {
		res, err := tp.ListObjects(t.Context(), "bk", prefix, after, delim, max)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range res.Objects {
			names = append(names, o.Name)
		}
		return fmt.Sprintf("%v %v %v", names, res.CommonPrefixes, res.IsTruncated)
	}
	cases := []struct {
		prefix, after, delim string
		max                  int
		want                 string
	}{
		{"", "", "", 100, "[a.txt docs/1 docs/2 docs/sub/3 photos/2026/x.jpg photos/2026/y.jpg] [] false"},
		{"", "", "/", 100, "[a.txt] [docs/ photos/] false"},
		{"docs/", "", "/", 100, "[docs/1 docs/2] [docs/sub/] false"},
		{"", "", "", 2, "[a.txt docs/1] [] true"},
		{"", "docs/1", "", 2, "[docs/2 docs/sub/3] [] true"},
		{"", "a.txt", "/", 1, "[] [docs/] true"},
		{"", "docs/", "/", 5, "[] [photos/] false"},        // a NextMarker: skip the whole prefix
		{"", "docs/1", "/", 5, "[] [docs/ photos/] false"}, // a key inside a prefix: the rest rolls up
		{"photos/", "", "", 100, "[photos/2026/x.jpg photos/2026/y.jpg] [] false"},
	}
	for _, c := range cases {
		if got := list(c.prefix, c.after, c.delim, c.max); got != c.want {
			t.Errorf("list(prefix %q, after %q, delim %q, max %d) = %s, want %s", c.prefix, c.after, c.delim, c.max, got, c.want)
		}
	}
	if _, err := tp.ListObjects(t.Context(), "nope", "", "", "", 10); !errors.Is(err, objlayer.ErrBucketNotFound) {
		t.Fatalf("listing a missing bucket: %v", err)
	}
}

func TestBuckets(t *testing.T) {
	tp := newTestPool(t, 2, 4, 2)
	if err := tp.MakeBucket(t.Context(), "bk"); !errors.Is(err, objlayer.ErrBucketExists) {
		t.Fatalf("duplicate bucket: %v", err)
	}
	if err := tp.MakeBucket(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	bs, err := tp.ListBuckets(t.Context())
	if err != nil || len(bs) != 2 || bs[0].Name != "bk" || bs[1].Name != "other" {
		t.Fatalf("ListBuckets = %+v %v", bs, err)
	}
	tp.put(t, "x", []byte("x"))
	if err := tp.DeleteBucket(t.Context(), "bk"); !errors.Is(err, objlayer.ErrBucketNotEmpty) {
		t.Fatalf("deleting a non-empty bucket: %v", err)
	}
	if err := tp.DeleteBucket(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.StatBucket(t.Context(), "other"); !errors.Is(err, objlayer.ErrBucketNotFound) {
		t.Fatalf("deleted bucket: %v", err)
	}
	if err := tp.SetBucketVersioning(t.Context(), "bk", "Enabled"); err != nil {
		t.Fatal(err)
	}
	if b, err := tp.StatBucket(t.Context(), "bk"); err != nil || b.Versioning != "Enabled" {
		t.Fatalf("versioning: %+v %v", b, err)
	}
}

// TestBucketReadBeforeAChangeIsNotCached: a bucket record read from the
// drives while the bucket changed (here or on a peer, which drops the
// cached record) is answered but not kept, so the next request reads the
// new record instead of the old one for the cache's lifetime.
func TestBucketReadBeforeAChangeIsNotCached(t *testing.T) {
	var c bucketCache
	c.ttl = time.Minute
	gen := c.generation()
	c.forget("bk") // the change lands while the old record is being read
	c.put("bk", objlayer.BucketInfo{Name: "bk", Versioning: "Suspended"}, nil, gen)
	if e, ok := c.get("bk"); ok {
		t.Fatalf("a record read before the change was kept: %+v", e.info)
	}
	gen = c.generation()
	c.put("bk", objlayer.BucketInfo{Name: "bk", Versioning: "Enabled"}, nil, gen)
	if e, ok := c.get("bk"); !ok || e.info.Versioning != "Enabled" {
		t.Fatalf("a record read with no change since was not kept: %+v %v", e.info, ok)
	}
}

func TestConcurrentWritersEndWithOneWinnerEverywhere(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	var wg sync.WaitGroup
	var retried atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				data := []byte(fmt.Sprintf("writer %d round %d", w, i))
				if i%3 == 0 {
					data = randomBytes(200_000 + w) // mix inline and shard files
				}
				// A write that lost to a concurrent one stamped later is
				// stamped again and committed (commitVersion). One that
				// lost maxRestamps+1 races in a row fails as superseded
				// (503 SlowDown), and the client's retry wins: with eight
				// writers on two cores that happens, rarely.
				var err error
				for try := 0; try < 4; try++ {
					_, err = tp.PutObject(t.Context(), "bk", "hot", bytes.NewReader(data), int64(len(data)), objlayer.PutOptions{})
					if !errors.Is(err, drive.ErrSuperseded) || !errors.Is(err, objlayer.ErrWriteQuorum) {
						break
					}
					retried.Add(1)
				}
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of 80 writes lost every restamp and were retried", retried.Load())
	var first *drive.Record
	for _, d := range tp.drives {
		vs, err := d.Versions(t.Context(), "bk", "hot")
		if err != nil || len(vs) != 1 {
			t.Fatalf("drive %s holds %d versions (%v)", d.Root(), len(vs), err)
		}
		if first == nil {
			first = vs[0]
		} else if !sameVersion(first, vs[0]) {
			t.Fatalf("drives disagree on the winner: %d/%s vs %d/%s", first.ModTime, first.ETag, vs[0].ModTime, vs[0].ETag)
		}
	}
	got := tp.get(t, "hot")
	if len(got) == 0 {
		t.Fatal("winner unreadable")
	}
}

func BenchmarkPutTiny(b *testing.B) { benchPut(b, 4096) }

func BenchmarkGetTiny(b *testing.B) {
	tp := newTestPool(b, 1, 4, 2)
	data := randomBytes(4096)
	tp.put(b, "tiny", data)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := tp.GetObject(b.Context(), io.Discard, "bk", "tiny", nil, 0, -1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPut1MiB(b *testing.B) { benchPut(b, 1<<20) }

// BenchmarkPut8MiB streams an object of eight blocks: every drive's shard
// file takes eight block writes.
func BenchmarkPut8MiB(b *testing.B) { benchPut(b, 8<<20) }

// benchPut PUTs objects of size bytes to a set of four drives (2+2).
func benchPut(b *testing.B, size int) {
	tp := newTestPool(b, 1, 4, 2)
	data := randomBytes(size)
	b.SetBytes(int64(len(data)))
	i := 0
	for b.Loop() {
		i++
		if _, err := tp.PutObject(b.Context(), "bk", fmt.Sprintf("o-%d", i), bytes.NewReader(data), int64(len(data)), objlayer.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// digestReader fails at EOF, the way the front end's Content-MD5 and
// checksum verifiers do.
type digestReader struct{ r io.Reader }

var errBadDigest = errors.New("bad digest")

func (d digestReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, errBadDigest
	}
	return n, err
}

func TestVerifierErrorAtEOFStoresNothing(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	for _, size := range []int{10, 4096, DefaultInlineLimit, 300_000} {
		data := randomBytes(size)
		for _, declared := range []int64{int64(size), -1} {
			_, err := tp.PutObject(t.Context(), "bk", "digest", digestReader{bytes.NewReader(data)}, declared, objlayer.PutOptions{})
			if !errors.Is(err, errBadDigest) {
				t.Fatalf("size %d declared %d: err = %v, want the verifier's error", size, declared, err)
			}
			if _, err := tp.StatObject(t.Context(), "bk", "digest", nil); !errors.Is(err, objlayer.ErrObjectNotFound) {
				t.Fatalf("size %d declared %d: a body failing verification was stored", size, declared)
			}
		}
	}
}

// rottenInline hands out records whose inline shard has a flipped byte.
type rottenInline struct{ Drive }

func (d rottenInline) GetVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*drive.Record, error) {
	r, err := d.Drive.GetVersion(ctx, bucket, object, versionID)
	if err == nil && len(r.Inline) > 0 {
		c := *r
		c.Inline = append([]byte(nil), r.Inline...)
		c.Inline[len(c.Inline)/2] ^= 0xff
		r = &c
	}
	return r, err
}

// A read asks only a read quorum of drives for the record; when a shard
// among those is rotten, the drives not asked still supply theirs.
func TestReadsReachDrivesNotAskedForTheRecord(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	set := tp.Sets()[0]
	saved := set.Drives()
	exercised := 0
	for k := range 8 {
		key := fmt.Sprintf("small-%d", k)
		small := randomBytes(3000)
		tp.put(t, key, small)
		for pos := range saved {
			set.SetDrive(pos, rottenInline{saved[pos]})
			var buf bytes.Buffer
			_, bad, err := tp.GetObject(t.Context(), &buf, "bk", key, nil, 0, -1)
			set.SetDrive(pos, saved[pos])
			if err != nil || !bytes.Equal(buf.Bytes(), small) {
				t.Fatalf("%s, drive %d rotten: %v", key, pos, err)
			}
			h, err := set.OpenObject(t.Context(), "bk", key, nil)
			if err != nil {
				t.Fatal(err)
			}
			if h.read[pos] && h.rec.Erasure.Distribution[pos] < 2 {
				exercised++
				if !slices.Contains(bad, pos) {
					t.Errorf("%s: drive %d holds a data shard, was read and is rotten, but was not reported: %v", key, pos, bad)
				}
			}
		}
	}
	if exercised == 0 {
		t.Fatal("no read drive held a data shard: the fallback was never needed")
	}
}
