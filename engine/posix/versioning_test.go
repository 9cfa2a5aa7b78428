package posix

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// versionsOf lists a key's versions as "ID:body-or-marker" newest first,
// with the latest marked.
func versionsOf(t *testing.T, l *Layer, bucket, key string) string {
	t.Helper()
	res, err := l.ListObjectVersions(ctx, bucket, key, "", nil, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range res.Objects {
		if v.Name != key {
			continue
		}
		what := "DM"
		if !v.DeleteMarker {
			b, _ := mustRead(t, l, bucket, key, &v.VersionID)
			what = string(b)
		}
		if v.IsLatest {
			what += "*"
		}
		out = append(out, what)
	}
	return strings.Join(out, " ")
}

func TestVersioningEnabled(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		setVersioning(t, l, "bkt", "Enabled")
		v1 := putV(t, l, "bkt", "k", []byte("one"))
		v2 := putV(t, l, "bkt", "k", []byte("two"))
		if got := versionsOf(t, l, "bkt", "k"); got != "two* one" {
			t.Fatalf("versions: %s", got)
		}
		// The archive is where versitygw keeps it, under its ULID.
		h := keyHash("k")
		if _, err := os.Stat(filepath.Join(root, ".strata", "versions", "bkt", h[:2], h[2:4], h[4:6], h, objlayer.FormatULID(v1.VersionID))); err != nil {
			t.Fatalf("archived version: %v", err)
		}
		// A delete marker hides the key; deleting it brings two back.
		del, err := l.DeleteObject(ctx, "bkt", "k", nil, objlayer.DeleteVersioned)
		if err != nil || !del.DeleteMarker || del.VersionID == objlayer.NullVersion {
			t.Fatalf("delete marker: %+v %v", del, err)
		}
		_, info, err := read(t, l, "bkt", "k", nil)
		if err != nil || !info.DeleteMarker || info.VersionID != del.VersionID {
			t.Fatalf("latest is the marker: %+v %v", info, err)
		}
		if res, _ := l.ListObjects(ctx, "bkt", "", "", "", 10); len(res.Objects) != 0 {
			t.Fatalf("a delete marker listed: %s", names(res))
		}
		if got := versionsOf(t, l, "bkt", "k"); got != "DM* two one" {
			t.Fatalf("versions: %s", got)
		}
		res, err := l.DeleteObject(ctx, "bkt", "k", &del.VersionID, 0)
		if err != nil || !res.DeleteMarker {
			t.Fatalf("deleting the marker: %+v %v", res, err)
		}
		if b, info := mustRead(t, l, "bkt", "k", nil); string(b) != "two" || info.VersionID != v2.VersionID {
			t.Fatalf("after deleting the marker: %q", b)
		}
		// Deleting the latest version brings the one before back.
		if _, err := l.DeleteObject(ctx, "bkt", "k", &v2.VersionID, 0); err != nil {
			t.Fatal(err)
		}
		if b, info := mustRead(t, l, "bkt", "k", nil); string(b) != "one" || info.VersionID != v1.VersionID {
			t.Fatalf("after deleting the latest: %q", b)
		}
		// Deleting a version that is not there succeeds; so does the last.
		gone := newID()
		if _, err := l.DeleteObject(ctx, "bkt", "k", &gone, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := l.DeleteObject(ctx, "bkt", "k", &v1.VersionID, 0); err != nil {
			t.Fatal(err)
		}
		if _, _, err := read(t, l, "bkt", "k", nil); err == nil {
			t.Fatal("the key is still there")
		}
		ents, _ := os.ReadDir(filepath.Join(root, ".strata", "versions", "bkt"))
		for _, e := range ents {
			if e.Name() != stagingDir {
				t.Fatalf("versions directory left: %s", e.Name())
			}
		}
		// A delete marker for a key that never was (as S3 records one).
		res, err = l.DeleteObject(ctx, "bkt", "never", nil, objlayer.DeleteVersioned)
		if err != nil || !res.DeleteMarker {
			t.Fatalf("marker on a missing key: %+v %v", res, err)
		}
		if got := versionsOf(t, l, "bkt", "never"); got != "DM*" {
			t.Fatalf("versions of a key that never was: %s", got)
		}
	})
}

// A bucket whose versioning went Enabled, Suspended, Enabled: null
// versions come and go as in S3.
func TestVersioningSuspended(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		setVersioning(t, l, "bkt", "Enabled")
		v1 := putV(t, l, "bkt", "k", []byte("one"))
		setVersioning(t, l, "bkt", "Suspended")
		put(t, l, "bkt", "k", []byte("nullA"), objlayer.PutOptions{}) // archives one, becomes null
		put(t, l, "bkt", "k", []byte("nullB"), objlayer.PutOptions{}) // replaces null
		if got := versionsOf(t, l, "bkt", "k"); got != "nullB* one" {
			t.Fatalf("suspended writes: %s", got)
		}
		setVersioning(t, l, "bkt", "Enabled")
		putV(t, l, "bkt", "k", []byte("three")) // archives null as versions/null
		h := keyHash("k")
		if _, err := os.Stat(filepath.Join(root, ".strata", "versions", "bkt", h[:2], h[2:4], h[4:6], h, "null")); err != nil {
			t.Fatalf("archived null version: %v", err)
		}
		if got := versionsOf(t, l, "bkt", "k"); got != "three* nullB one" {
			t.Fatalf("versions: %s", got)
		}
		null := objlayer.NullVersion
		if b, _ := mustRead(t, l, "bkt", "k", &null); string(b) != "nullB" {
			t.Fatalf("null version by ID: %q", b)
		}
		setVersioning(t, l, "bkt", "Suspended")
		// A suspended delete: a null marker replacing the null version.
		res, err := l.DeleteObject(ctx, "bkt", "k", nil, objlayer.DeleteSuspended)
		if err != nil || !res.DeleteMarker || res.VersionID != objlayer.NullVersion {
			t.Fatalf("suspended delete: %+v %v", res, err)
		}
		if got := versionsOf(t, l, "bkt", "k"); got != "DM* three one" {
			t.Fatalf("after a suspended delete: %s", got)
		}
		// Deleting the null marker brings three back.
		if _, err := l.DeleteObject(ctx, "bkt", "k", &null, 0); err != nil {
			t.Fatal(err)
		}
		if got := versionsOf(t, l, "bkt", "k"); got != "three* one" {
			t.Fatalf("after deleting the null marker: %s", got)
		}
		// The unversioned mode removes the null version only.
		put(t, l, "bkt", "k", []byte("nullC"), objlayer.PutOptions{})
		if _, err := l.DeleteObject(ctx, "bkt", "k", nil, objlayer.DeleteUnversioned); err != nil {
			t.Fatal(err)
		}
		if got := versionsOf(t, l, "bkt", "k"); got != "three* one" {
			t.Fatalf("after removing the null version: %s", got)
		}
		_ = v1
	})
}

func TestVersioningNever(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		put(t, l, "bkt", "k", []byte("one"), objlayer.PutOptions{})
		put(t, l, "bkt", "k", []byte("two"), objlayer.PutOptions{})
		if got := versionsOf(t, l, "bkt", "k"); got != "two*" {
			t.Fatalf("versions: %s", got)
		}
		if _, err := os.Stat(filepath.Join(root, ".strata", "versions", "bkt")); err == nil {
			t.Fatal("an unversioned bucket has a versions directory")
		}
		if _, err := l.DeleteObject(ctx, "bkt", "k", nil, objlayer.DeleteUnversioned); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "bkt", "k")); !os.IsNotExist(err) {
			t.Fatal("the file is still there")
		}
		if _, err := l.DeleteObject(ctx, "bkt", "k", nil, objlayer.DeleteUnversioned); err != nil {
			t.Fatalf("deleting what is not there: %v", err)
		}
	})
}

// Two replicas deleting a key's versions at once, beside writes of it
// (ceph/s3-tests' test_versioned_concurrent_object_create_and_remove,
// which versitygw's unlocked deletes failed): every version listed and
// deleted is gone at the end.
func TestConcurrentVersionDeletes(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		root := t.TempDir()
		ls := []*Layer{open(t, root, mode), open(t, root, mode)}
		mkBucket(t, ls[0], "bkt", "Enabled")
		for round := range 4 {
			var wg sync.WaitGroup
			errs := make(chan error, 100)
			clear := func(n int) {
				res, err := ls[n%2].ListObjectVersions(ctx, "bkt", "", "", nil, "", 1000)
				if err != nil {
					t.Error(err)
					return
				}
				for i, v := range res.Objects {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := ls[(n+i)%2].DeleteObject(ctx, "bkt", v.Name, &v.VersionID, 0); err != nil {
							errs <- err
						}
					}()
				}
			}
			for i := range 3 {
				for j := range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						data := []byte(fmt.Sprintf("data %d %d", i, j))
						if _, err := ls[(i+j)%2].PutObject(ctx, "bkt", "obj", strings.NewReader(string(data)), int64(len(data)),
							objlayer.PutOptions{VersionID: newID()}); err != nil {
							errs <- err
						}
					}()
				}
				clear(i)
			}
			wg.Wait()
			clear(round)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("round %d: %v", round, err)
			}
			res, err := ls[0].ListObjectVersions(ctx, "bkt", "", "", nil, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range res.Objects {
				t.Errorf("round %d: version %s (latest %v, ETag %q) left after every listed version was deleted",
					round, objlayer.FormatVersionID(v.VersionID), v.IsLatest, v.ETag)
			}
		}
	})
}

// Versions kept elsewhere (another filesystem: copied, not linked), their
// sidecar attributes below the sidecar directory by their absolute path.
func TestVersionsElsewhere(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		root, elsewhere := t.TempDir(), t.TempDir()
		l := open(t, root, mode, func(o *Options) { o.VersionsDir = elsewhere })
		l.noLinks = true
		mkBucket(t, l, "bkt", "Enabled")
		v1 := put(t, l, "bkt", "k", []byte("one"), objlayer.PutOptions{VersionID: newID(), Meta: map[string]string{objlayer.MetaUserPrefix + "a": "1"}})
		time.Sleep(5 * time.Millisecond)
		putV(t, l, "bkt", "k", []byte("two"))
		if got := versionsOf(t, l, "bkt", "k"); got != "two* one" {
			t.Fatalf("versions: %s", got)
		}
		h := keyHash("k")
		vpath := filepath.Join(elsewhere, "bkt", h[:2], h[2:4], h[4:6], h, objlayer.FormatULID(v1.VersionID))
		fi, err := os.Stat(vpath)
		if err != nil || !fi.ModTime().Equal(v1.ModTime) {
			t.Fatalf("copied version: %v %v (time %v, want %v)", fi, err, fi.ModTime(), v1.ModTime)
		}
		if mode == MetadataSidecar {
			side := filepath.Join(root, ".strata", "meta", strings.TrimPrefix(vpath, "/"), "meta", "metadata")
			if b, err := os.ReadFile(side); err != nil || string(b) != `{"a":"1"}` {
				t.Fatalf("copied version's sidecar: %q %v", b, err)
			}
		}
		_, info := mustRead(t, l, "bkt", "k", &v1.VersionID)
		if info.Meta[objlayer.MetaUserPrefix+"a"] != "1" {
			t.Fatalf("copied version's metadata: %v", info.Meta)
		}
		cur, _ := mustRead(t, l, "bkt", "k", nil)
		_ = cur
		latest, _ := l.OpenObjectMeta(ctx, "bkt", "k", nil)
		id := latest.Info().VersionID
		latest.Close()
		if _, err := l.DeleteObject(ctx, "bkt", "k", &id, 0); err != nil {
			t.Fatal(err)
		}
		if b, info := mustRead(t, l, "bkt", "k", nil); string(b) != "one" || info.Meta[objlayer.MetaUserPrefix+"a"] != "1" || !info.ModTime.Equal(v1.ModTime) {
			t.Fatalf("restored by copy: %q %+v", b, info)
		}
	})
}
