package posix

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

func TestPutGetMetadata(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		meta := map[string]string{
			objlayer.MetaContentType: "text/plain", objlayer.MetaCacheControl: "no-cache",
			objlayer.MetaExpires: "Thu, 01 Dec 1994 16:00:00 GMT", objlayer.MetaWebsiteRedirect: "/other",
			objlayer.MetaContentEncoding: "gzip", objlayer.MetaContentDisposition: "inline", objlayer.MetaContentLanguage: "en",
			objlayer.MetaUserPrefix + "color": "blue", objlayer.MetaUserPrefix + "shape": "round, square",
			objlayer.MetaTagging:                  "a=1&b=x+y",
			objlayer.MetaChecksumPrefix + "CRC32": "AAAAAA==", objlayer.MetaChecksumType: "FULL_OBJECT",
			objlayer.MetaRetention:                  `{"Mode":"GOVERNANCE","RetainUntilDate":"2030-01-02T03:04:05Z"}`,
			objlayer.MetaLegalHold:                  "ON",
			objlayer.InternalMetaPrefix + "Acl":     `{"owner":"bob"}`,
			objlayer.InternalMetaPrefix + "Sse-Key": "c2VjcmV0",
			"X-Amz-Storage-Class":                   "STANDARD",
		}
		data := []byte("hello, world")
		mt := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
		info := put(t, l, "bkt", "dir/obj.txt", data, objlayer.PutOptions{Meta: meta, ModTime: mt})
		if info.ETag != md5hex(data) || info.Size != int64(len(data)) || !info.ModTime.Equal(mt) || info.VersionID != objlayer.NullVersion {
			t.Fatalf("PUT answered %+v", info)
		}
		got, ginfo := mustRead(t, l, "bkt", "dir/obj.txt", nil)
		if !bytes.Equal(got, data) || ginfo.ETag != md5hex(data) || !ginfo.ModTime.Equal(mt) {
			t.Fatalf("GET: %q %+v", got, ginfo)
		}
		if !maps.Equal(ginfo.Meta, meta) {
			t.Fatalf("metadata:\n got %v\nwant %v", ginfo.Meta, meta)
		}
		if fi, err := os.Stat(filepath.Join(root, "bkt", "dir", "obj.txt")); err != nil || fi.Mode().Perm() != 0o644 {
			t.Fatalf("the object's file: %v %v", fi, err)
		}
		// A HEAD needs no file kept open.
		h, err := l.OpenObjectMeta(ctx, "bkt", "dir/obj.txt", nil)
		if err != nil || h.Info().ETag != md5hex(data) || !maps.Equal(h.Info().Meta, meta) {
			t.Fatalf("HEAD: %v", err)
		}
		if err := h.WriteRange(ctx, io.Discard, 0, -1); err == nil {
			t.Fatal("a meta handle read data")
		}
		h.Close()
		// Ranges.
		h, _ = l.OpenObject(ctx, "bkt", "dir/obj.txt", nil)
		var b bytes.Buffer
		if err := h.WriteRange(ctx, &b, 7, 5); err != nil || b.String() != "world" {
			t.Fatalf("range: %q %v", b.String(), err)
		}
		h.Close()
	})
}

func TestPutOptions(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		// ETag from options, BodyETag, AfterBody adding to the metadata.
		info := put(t, l, "bkt", "a", []byte("x"), objlayer.PutOptions{ETag: "0123456789abcdef0123456789abcdef-3"})
		if _, i := mustRead(t, l, "bkt", "a", nil); i.ETag != "0123456789abcdef0123456789abcdef-3" || info.ETag != i.ETag {
			t.Fatalf("kept ETag: %s", i.ETag)
		}
		put(t, l, "bkt", "b", []byte("x"), objlayer.PutOptions{BodyETag: func() string { return "feedface" },
			AfterBody: func(m map[string]string) error { m[objlayer.MetaChecksumPrefix+"SHA256"] = "c3Vt"; return nil }})
		if _, i := mustRead(t, l, "bkt", "b", nil); i.ETag != "feedface" || i.Meta[objlayer.MetaChecksumPrefix+"SHA256"] != "c3Vt" {
			t.Fatalf("BodyETag/AfterBody: %+v", i)
		}
		// Refusals leave nothing.
		refused := errors.New("bad trailer checksum")
		_, err := l.PutObject(ctx, "bkt", "c", strings.NewReader("x"), 1, objlayer.PutOptions{AfterBody: func(map[string]string) error { return refused }})
		wantErr(t, err, refused)
		_, err = l.PutObject(ctx, "bkt", "c", strings.NewReader("xy"), 3, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrIncompleteBody)
		_, err = l.PutObject(ctx, "bkt", "c", strings.NewReader("xyzw"), 3, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrBodyTooLong)
		_, err = l.PutObject(ctx, "bkt", "c", io.MultiReader(strings.NewReader("abc"), errReader{refused}), -1, objlayer.PutOptions{})
		wantErr(t, err, refused)
		if _, _, err := read(t, l, "bkt", "c", nil); !errors.Is(err, objlayer.ErrObjectNotFound) {
			t.Fatalf("a refused PUT stored something: %v", err)
		}
		// Unknown size.
		put(t, l, "bkt", "d", nil, objlayer.PutOptions{})
		if _, err := l.PutObject(ctx, "bkt", "e", strings.NewReader("abc"), -1, objlayer.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if b, i := mustRead(t, l, "bkt", "e", nil); string(b) != "abc" || i.Size != 3 {
			t.Fatalf("unknown size: %q", b)
		}
		// Overwrites clear what the previous version had (sidecar included).
		put(t, l, "bkt", "f", []byte("1"), objlayer.PutOptions{Meta: map[string]string{objlayer.MetaContentType: "a/b", objlayer.MetaTagging: "k=v"}})
		put(t, l, "bkt", "f", []byte("2"), objlayer.PutOptions{})
		if _, i := mustRead(t, l, "bkt", "f", nil); len(i.Meta) != 0 {
			t.Fatalf("stale metadata after an overwrite: %v", i.Meta)
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestKeys(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		for _, key := range []string{"../x", "a//b", "/a", "a/./b", ".sgwtmp/x", "x/.sgwtmp/y", "a\x00b", "\xff\xfe"} {
			_, err := l.PutObject(ctx, "bkt", key, strings.NewReader("x"), 1, objlayer.PutOptions{})
			wantErr(t, err, objlayer.ErrInvalidKey)
		}
		_, err := l.PutObject(ctx, "bkt", strings.Repeat("n", 256), strings.NewReader("x"), 1, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrKeyTooLong)
		put(t, l, "bkt", strings.Repeat("n", 255), []byte("x"), objlayer.PutOptions{})
		put(t, l, "bkt", strings.Repeat("m", 240), []byte("x"), objlayer.PutOptions{})
		put(t, l, "bkt", strings.Repeat("m", 240), []byte("y"), objlayer.PutOptions{}) // versitygw failed overwrites of names over 227 bytes
		// A parent that is an object; a key that is a directory of objects.
		put(t, l, "bkt", "file", []byte("x"), objlayer.PutOptions{})
		_, err = l.PutObject(ctx, "bkt", "file/below", strings.NewReader("x"), 1, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrKeyConflict)
		put(t, l, "bkt", "dir/child", []byte("x"), objlayer.PutOptions{})
		_, err = l.PutObject(ctx, "bkt", "dir", strings.NewReader("x"), 1, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrKeyConflict)
		// An empty directory made in passing is no object: a file replaces it.
		if err := os.Mkdir(filepath.Join(root, "bkt", "empty"), 0o755); err != nil {
			t.Fatal(err)
		}
		put(t, l, "bkt", "empty", []byte("now a file"), objlayer.PutOptions{})
		// Unknown buckets.
		_, err = l.PutObject(ctx, "nope", "k", strings.NewReader("x"), 1, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrBucketNotFound)
		_, err = l.OpenObject(ctx, "bkt", "missing", nil)
		wantErr(t, err, objlayer.ErrObjectNotFound)
		_, err = l.OpenObject(ctx, "bkt", "file/below", nil)
		wantErr(t, err, objlayer.ErrObjectNotFound)
		_, err = l.OpenObject(ctx, "bkt", "dir", nil) // a directory, not an object
		wantErr(t, err, objlayer.ErrObjectNotFound)
	})
}

func TestContainment(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		base := t.TempDir()
		root := filepath.Join(base, "root")
		if err := os.MkdirAll(filepath.Join(base, "outside"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(base, "outside", "secret"), []byte("secret"))
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		l := open(t, root, mode)
		mkBucket(t, l, "jail", "")
		mkBucket(t, l, "other", "")
		put(t, l, "jail", "inside/file", []byte("inside"), objlayer.PutOptions{})
		put(t, l, "other", "private", []byte("private"), objlayer.PutOptions{})
		for name, target := range map[string]string{
			"jail/abs": filepath.Join(base, "outside"), "jail/rel": "../../outside", "jail/cross": "../other",
			"jail/inner": "inside", "linked": filepath.Join(base, "outside"), "jail/file-out": filepath.Join(base, "outside", "secret"),
		} {
			if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
				t.Fatal(err)
			}
		}
		for _, key := range []string{"abs/secret", "rel/secret", "cross/private", "file-out"} {
			_, err := l.OpenObject(ctx, "jail", key, nil)
			wantErr(t, err, objlayer.ErrOutsideBucket)
			_, err = l.PutObject(ctx, "jail", key, strings.NewReader("pwned"), 5, objlayer.PutOptions{})
			wantErr(t, err, objlayer.ErrOutsideBucket)
			_, err = l.DeleteObject(ctx, "jail", key, nil, objlayer.DeleteUnversioned)
			wantErr(t, err, objlayer.ErrOutsideBucket)
		}
		if b, _ := mustRead(t, l, "jail", "inner/file", nil); string(b) != "inside" {
			t.Fatalf("a link inside the bucket: %q", b)
		}
		_, err := l.OpenObject(ctx, "linked", "secret", nil)
		wantErr(t, err, objlayer.ErrOutsideBucket)
		_, err = l.StatBucket(ctx, "linked")
		wantErr(t, err, objlayer.ErrOutsideBucket)
		keys, _ := listAll(t, l, "jail", "", "", 1000)
		if strings.Join(keys, " ") != "inside/file" {
			t.Fatalf("listing shows links out of the bucket: %v", keys)
		}
		if res, err := l.ListObjects(ctx, "jail", "abs/", "", "", 1000); err != nil || len(res.Objects) != 0 {
			t.Fatalf("listing through a link out: %v %v", names(res), err)
		}
		if b, err := os.ReadFile(filepath.Join(base, "outside", "secret")); err != nil || string(b) != "secret" {
			t.Fatal("the file outside changed")
		}
		// The fallback without openat2 refuses the same.
		l.noAt2.Store(true)
		_, err = l.OpenObject(ctx, "jail", "rel/secret", nil)
		wantErr(t, err, objlayer.ErrOutsideBucket)
		if b, _ := mustRead(t, l, "jail", "inner/file", nil); string(b) != "inside" {
			t.Fatalf("a link inside the bucket (fallback): %q", b)
		}
	})
}

// A handle reads the version it resolved, whatever happens to the key.
func TestHandleKeepsItsVersion(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		setVersioning(t, l, "bkt", "Enabled")
		first := bytes.Repeat([]byte("1"), 100000)
		putV(t, l, "bkt", "k", first)
		h, err := l.OpenObject(ctx, "bkt", "k", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		putV(t, l, "bkt", "k", []byte("second"))                              // archives the first
		_, _ = l.DeleteObject(ctx, "bkt", "k", nil, objlayer.DeleteVersioned) // a marker
		put(t, l, "bkt", "k", []byte("null"), objlayer.PutOptions{})          // suspended-style write
		firstID := h.Info().VersionID
		_, _ = l.DeleteObject(ctx, "bkt", "k", &firstID, 0) // and the first version deleted
		var b bytes.Buffer
		if err := h.WriteRange(ctx, &b, 0, -1); err != nil || !bytes.Equal(b.Bytes(), first) {
			t.Fatalf("the handle read %d bytes (%v), want the first version's %d", b.Len(), err, len(first))
		}
		// Unversioned overwrite too.
		l2, _ := volume(t, mode, "plain")
		put(t, l2, "plain", "k", first, objlayer.PutOptions{})
		h2, _ := l2.OpenObject(ctx, "plain", "k", nil)
		defer h2.Close()
		put(t, l2, "plain", "k", []byte("new"), objlayer.PutOptions{})
		b.Reset()
		if err := h2.WriteRange(ctx, &b, 0, -1); err != nil || !bytes.Equal(b.Bytes(), first) {
			t.Fatalf("after an overwrite the handle read %d bytes (%v)", b.Len(), err)
		}
	})
}

// Files created through POSIX get their MD5 ETag when first read.
func TestPOSIXFilesGetETags(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		root := t.TempDir()
		l := open(t, root, mode, func(o *Options) { o.ETagSyncLimit = 1000 })
		small, large := []byte("small file"), bytes.Repeat([]byte("L"), 5000)
		writeFile(t, filepath.Join(root, "nas", "small"), small)
		writeFile(t, filepath.Join(root, "nas", "deep", "large"), large)
		res, err := l.ListObjects(ctx, "nas", "", "", "", 10)
		if err != nil || names(res) != "deep/large small" || res.Objects[1].ETag != "" {
			t.Fatalf("listing before any read: %v %+v", err, res)
		}
		if _, info := mustRead(t, l, "nas", "small", nil); info.ETag != md5hex(small) {
			t.Fatalf("small file's ETag: %q", info.ETag)
		}
		res, _ = l.ListObjects(ctx, "nas", "", "", "", 10)
		if res.Objects[1].ETag != md5hex(small) {
			t.Fatal("the computed ETag was not stored")
		}
		h, err := l.OpenObjectMeta(ctx, "nas", "deep/large", nil)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, info := mustRead(t, l, "nas", "deep/large", nil)
			if info.ETag == md5hex(large) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the large file got no ETag in the background: %q", info.ETag)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Stored as versitygw stores ETags: quoted.
		if v, _ := rawAttr(t, l, l.treePlace("nas", "small"), attrETag); string(v) != `"`+md5hex(small)+`"` {
			t.Fatalf("stored ETag %q", v)
		}
	})
}

func TestDirectoryObjects(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		info := put(t, l, "bkt", "a/b/", nil, objlayer.PutOptions{Meta: map[string]string{objlayer.MetaUserPrefix + "k": "v"}})
		if info.ETag != emptyMD5 || info.VersionID != objlayer.NullVersion {
			t.Fatalf("directory object PUT: %+v", info)
		}
		if fi, err := os.Stat(filepath.Join(root, "bkt", "a", "b")); err != nil || !fi.IsDir() {
			t.Fatalf("no directory: %v", err)
		}
		_, got := mustRead(t, l, "bkt", "a/b/", nil)
		if got.ETag != emptyMD5 || got.Meta[objlayer.MetaContentType] != dirContentType || got.Meta[objlayer.MetaUserPrefix+"k"] != "v" {
			t.Fatalf("directory object: %+v", got)
		}
		_, err := l.PutObject(ctx, "bkt", "c/", strings.NewReader("data"), 4, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrInvalidKey)
		_, err = l.OpenObject(ctx, "bkt", "a/", nil) // made in passing
		wantErr(t, err, objlayer.ErrObjectNotFound)
		_, err = l.OpenObject(ctx, "bkt", "a/b", nil) // the key without '/'
		wantErr(t, err, objlayer.ErrObjectNotFound)
		// A directory object holding objects stays listed; deleted, it
		// becomes a directory made in passing.
		put(t, l, "bkt", "a/b/c", []byte("x"), objlayer.PutOptions{})
		keys, _ := listAll(t, l, "bkt", "", "", 1000)
		if strings.Join(keys, " ") != "a/b/ a/b/c" {
			t.Fatalf("listing: %v", keys)
		}
		if _, err := l.DeleteObject(ctx, "bkt", "a/b/", nil, objlayer.DeleteVersioned); err != nil {
			t.Fatal(err)
		}
		keys, _ = listAll(t, l, "bkt", "", "", 1000)
		if strings.Join(keys, " ") != "a/b/c" {
			t.Fatalf("listing after deleting the directory object: %v", keys)
		}
		// Deleting the last object prunes the directories made in passing.
		if _, err := l.DeleteObject(ctx, "bkt", "a/b/c", nil, objlayer.DeleteUnversioned); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "bkt", "a")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("emptied directories left: %v", err)
		}
		// ... but not a directory object.
		put(t, l, "bkt", "d/", nil, objlayer.PutOptions{})
		put(t, l, "bkt", "d/e/f", []byte("x"), objlayer.PutOptions{})
		if _, err := l.DeleteObject(ctx, "bkt", "d/e/f", nil, objlayer.DeleteUnversioned); err != nil {
			t.Fatal(err)
		}
		if _, _, err := read(t, l, "bkt", "d/", nil); err != nil {
			t.Fatalf("pruning removed a directory object: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "bkt", "d", "e")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("an emptied directory below a directory object stayed")
		}
	})
}

func TestUpdateObjectMeta(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		setVersioning(t, l, "bkt", "Enabled")
		v1 := putV(t, l, "bkt", "k", []byte("one"))
		putV(t, l, "bkt", "k", []byte("two"))
		put(t, l, "bkt", "k", []byte("null"), objlayer.PutOptions{Meta: map[string]string{objlayer.MetaContentType: "x/y"}}) // archives v2
		info, err := l.UpdateObjectMeta(ctx, "bkt", "k", &v1.VersionID, func(m map[string]string) map[string]string {
			m[objlayer.MetaTagging] = "t=1"
			m[objlayer.MetaLegalHold] = "ON"
			m[objlayer.InternalMetaPrefix+"Acl"] = "doc"
			return m
		})
		if err != nil || info.ETag != md5hex([]byte("one")) {
			t.Fatalf("update of an archived version: %+v %v", info, err)
		}
		_, got := mustRead(t, l, "bkt", "k", &v1.VersionID)
		want := map[string]string{objlayer.MetaTagging: "t=1", objlayer.MetaLegalHold: "ON", objlayer.InternalMetaPrefix + "Acl": "doc"}
		if !maps.Equal(got.Meta, want) {
			t.Fatalf("archived version's metadata %v", got.Meta)
		}
		_, err = l.UpdateObjectMeta(ctx, "bkt", "k", nil, func(m map[string]string) map[string]string {
			delete(m, objlayer.MetaContentType)
			m[objlayer.MetaRetention] = `{"Mode":"COMPLIANCE","RetainUntilDate":"2031-01-01T00:00:00Z"}`
			return m
		})
		if err != nil {
			t.Fatal(err)
		}
		body, cur := mustRead(t, l, "bkt", "k", nil)
		if string(body) != "null" || len(cur.Meta) != 1 || cur.Meta[objlayer.MetaRetention] == "" {
			t.Fatalf("current after update: %q %v", body, cur.Meta)
		}
		if _, ok := rawAttr(t, l, l.treePlace("bkt", "k"), "content-type"); ok {
			t.Fatal("a removed header stayed")
		}
		missing := newID()
		_, err = l.UpdateObjectMeta(ctx, "bkt", "k", &missing, func(m map[string]string) map[string]string { return m })
		wantErr(t, err, objlayer.ErrObjectNotFound)
		if _, err := l.DeleteObject(ctx, "bkt", "k", nil, objlayer.DeleteVersioned); err != nil {
			t.Fatal(err)
		}
		_, err = l.UpdateObjectMeta(ctx, "bkt", "k", nil, func(m map[string]string) map[string]string { return m })
		wantErr(t, err, objlayer.ErrObjectNotFound)
	})
}

// A conditional write's Condition is asked under the key's publish lock
// with the version it would replace: of writers that each accept only "no
// current version" (If-None-Match: *), exactly one succeeds; a refused
// write stores nothing.
func TestConditionUnderThePublishLock(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		errExists := errors.New("exists")
		onlyNew := func(cur *objlayer.ObjectInfo) error {
			if cur != nil && !cur.DeleteMarker {
				return errExists
			}
			return nil
		}
		const writers = 8
		var wg sync.WaitGroup
		var won atomic.Int32
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				data := []byte(fmt.Sprintf("writer %d", i))
				_, err := l.PutObject(ctx, "bkt", "k", bytes.NewReader(data), int64(len(data)), objlayer.PutOptions{Condition: onlyNew})
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, errExists):
					t.Errorf("writer %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("%d conditional writers of a new key succeeded, want 1", won.Load())
		}
		before, _ := mustRead(t, l, "bkt", "k", nil)
		_, err := l.PutObject(ctx, "bkt", "k", strings.NewReader("late"), 4, objlayer.PutOptions{Condition: onlyNew})
		wantErr(t, err, errExists)
		if after, _ := mustRead(t, l, "bkt", "k", nil); !bytes.Equal(after, before) {
			t.Fatalf("a refused conditional write changed the object: %q, was %q", after, before)
		}
	})
}

// chunky hands out its data a few bytes at a time, sizes cycling.
type chunky struct {
	data []byte
	i    int
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	c.i++
	n := min(len(p), len(c.data), []int{1, 7, 4096, 100_000, 3}[c.i%5])
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// stagedFiles counts this process's open files in dir (an O_TMPFILE reads
// as "dir/#inode (deleted)"). The layer runs on Linux only, where
// /proc/self/fd is always there.
func stagedFiles(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// TestBodyHeadGathered: bodies around the size gathered before a temp file
// is made, read in chunks of every size, are stored whole with their MD5;
// a body trickling in holds no temp file until its head has come, and is
// stored whole after.
func TestBodyHeadGathered(t *testing.T) {
	l, _ := volume(t, MetadataXattr, "bkt")
	for _, size := range []int{0, 1, headBytes - 1, headBytes, headBytes + 1, 2*headBytes + 5, 300 << 10} {
		data := bytes.Repeat([]byte("0123456789abcdefg"), size/17+1)[:size]
		key := fmt.Sprintf("obj-%d", size)
		info, err := l.PutObject(ctx, "bkt", key, &chunky{data: data}, int64(size), objlayer.PutOptions{})
		if err != nil {
			t.Fatalf("PUT of %d bytes: %v", size, err)
		}
		got, _ := mustRead(t, l, "bkt", key, nil)
		if !bytes.Equal(got, data) || info.ETag != md5hex(data) {
			t.Fatalf("%d bytes: read back %d bytes, ETag %s (want %s)", size, len(got), info.ETag, md5hex(data))
		}
		_, err = l.PutObject(ctx, "bkt", key+"-long", &chunky{data: data}, int64(size)-1, objlayer.PutOptions{})
		if size > 0 {
			wantErr(t, err, objlayer.ErrBodyTooLong)
		}
	}

	data := bytes.Repeat([]byte{'x'}, 300<<10)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := l.PutObject(ctx, "bkt", "trickled", pr, int64(len(data)), objlayer.PutOptions{})
		done <- err
	}()
	staging := l.stagingPath("bkt")
	for i := range headBytes - 1 {
		if _, err := pw.Write(data[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if n := stagedFiles(t, staging); n != 0 {
		t.Fatalf("%d temp files open with %d bytes of the body come", n, headBytes-1)
	}
	if _, err := pw.Write(data[headBytes-1:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := mustRead(t, l, "bkt", "trickled", nil); !bytes.Equal(got, data) {
		t.Fatalf("the trickled body read back as %d bytes", len(got))
	}
	if n := stagedFiles(t, staging); n != 0 {
		t.Fatalf("%d temp files left open", n)
	}
}
