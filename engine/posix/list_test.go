package posix

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

func TestListOrder(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		for _, k := range []string{"b", "a0", "a/x", "a.txt", "a-b", "a/y/z", "c/d"} {
			put(t, l, "bkt", k, []byte(k), objlayer.PutOptions{})
		}
		if err := os.MkdirAll(filepath.Join(root, "bkt", "empty", "deeper"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, "bkt", "x", ".sgwtmp", "hidden"), nil)
		writeFile(t, filepath.Join(root, "bkt", "bad\xffname"), nil)
		put(t, l, "bkt", "dirobj/", nil, objlayer.PutOptions{})
		keys, cps := listAll(t, l, "bkt", "", "", 1000)
		if got := strings.Join(keys, " "); got != "a-b a.txt a/x a/y/z a0 b c/d dirobj/" || len(cps) != 0 {
			t.Fatalf("key order: %s | %v", got, cps)
		}
		// With '/' a directory is a common prefix without being read: an
		// empty one too, as versitygw listed it.
		keys, cps = listAll(t, l, "bkt", "", "/", 1000)
		if got := strings.Join(keys, " ") + " | " + strings.Join(cps, " "); got != "a-b a.txt a0 b | a/ c/ dirobj/ empty/ x/" {
			t.Fatalf("delimited: %s", got)
		}
		keys, cps = listAll(t, l, "bkt", "a/", "/", 1000)
		if got := strings.Join(keys, " ") + " | " + strings.Join(cps, " "); got != "a/x | a/y/" {
			t.Fatalf("prefix a/: %s", got)
		}
		keys, _ = listAll(t, l, "bkt", "a", "", 1000)
		if got := strings.Join(keys, " "); got != "a-b a.txt a/x a/y/z a0" {
			t.Fatalf("prefix a: %s", got)
		}
		keys, cps = listAll(t, l, "bkt", "", "-", 1000)
		if got := strings.Join(keys, " ") + " | " + strings.Join(cps, " "); got != "a.txt a/x a/y/z a0 b c/d dirobj/ | a-" {
			t.Fatalf("delimiter '-': %s", got)
		}
		// The prefix's own directory object.
		keys, _ = listAll(t, l, "bkt", "dirobj/", "/", 1000)
		if strings.Join(keys, " ") != "dirobj/" {
			t.Fatalf("prefix naming a directory object: %v", keys)
		}
		// Markers: a key, a common prefix.
		res, _ := l.ListObjects(ctx, "bkt", "", "a.txt", "", 2)
		if names(res) != "a/x a/y/z" || !res.IsTruncated || res.NextMarker != "a/y/z" {
			t.Fatalf("after a.txt: %s %+v", names(res), res)
		}
		res, _ = l.ListObjects(ctx, "bkt", "", "a/", "/", 1000)
		if names(res) != "a0 b" || res.CommonPrefixes[0] != "c/" {
			t.Fatalf("after the common prefix a/: %s %v", names(res), res.CommonPrefixes)
		}
		// Truncated only when something follows.
		res, _ = l.ListObjects(ctx, "bkt", "", "c/d", "", 1)
		if names(res) != "dirobj/" || res.IsTruncated {
			t.Fatalf("last page: %s truncated %v", names(res), res.IsTruncated)
		}
		// Prefixes no key can match.
		for _, p := range []string{"../", "a//", "/", "./x"} {
			if res, err := l.ListObjects(ctx, "bkt", p, "", "", 1000); err != nil || len(res.Objects) != 0 {
				t.Fatalf("prefix %q: %v %v", p, names(res), err)
			}
		}
		if res, _ := l.ListObjects(ctx, "bkt", "", "", "", 0); len(res.Objects) != 0 || res.IsTruncated {
			t.Fatal("max-keys 0")
		}
		_, err := l.ListObjects(ctx, "nope", "", "", "", 10)
		wantErr(t, err, objlayer.ErrBucketNotFound)
	})
}

// TestListModel pages through a random tree with every page size,
// delimiter and prefix against the listing S3 defines over sorted keys.
func TestListModel(t *testing.T) {
	l, _ := volume(t, MetadataXattr, "bkt")
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"a", "a-b", "a.b", "a0", "b", "ab", "z"}
	seen := map[string]bool{}
	var keys []string
	for len(keys) < 300 {
		depth := 1 + rng.IntN(3)
		segs := make([]string, depth)
		for i := range segs {
			segs[i] = parts[rng.IntN(len(parts))] + fmt.Sprint(rng.IntN(3))
		}
		k := strings.Join(segs, "/")
		if seen[k] || conflicts(k, seen) {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
		put(t, l, "bkt", k, nil, objlayer.PutOptions{})
	}
	slices.Sort(keys)
	for _, delim := range []string{"", "/", "-", "0/"} {
		for _, prefix := range []string{"", "a", "a0/", "a-b1/a", "z"} {
			for _, page := range []int{1, 3, 1000} {
				wantKeys, wantCPs := model(keys, prefix, delim)
				gotKeys, gotCPs := listAll(t, l, "bkt", prefix, delim, page)
				if !slices.Equal(gotKeys, wantKeys) || !slices.Equal(gotCPs, wantCPs) {
					t.Fatalf("prefix %q delimiter %q page %d:\n got %v %v\nwant %v %v", prefix, delim, page, gotKeys, gotCPs, wantKeys, wantCPs)
				}
			}
		}
	}
}

// conflicts reports whether k cannot be a file beside the keys seen (a
// key is a directory of another, or the reverse).
func conflicts(k string, seen map[string]bool) bool {
	for s := range seen {
		if strings.HasPrefix(s, k+"/") || strings.HasPrefix(k, s+"/") {
			return true
		}
	}
	return false
}

func model(sorted []string, prefix, delim string) ([]string, []string) {
	var keys, cps []string
	for _, k := range sorted {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if cp, ok := commonPrefix(k, prefix, delim); ok {
			if len(cps) == 0 || cps[len(cps)-1] != cp {
				cps = append(cps, cp)
			}
			continue
		}
		keys = append(keys, k)
	}
	return keys, cps
}

// Paging through a large directory: every key once, in order.
func TestListPaging2500(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) { listPaging2500(t, mode) })
}

func listPaging2500(t *testing.T, mode MetadataMode) {
	l, root := volume(t, mode, "bkt")
	var want []string
	for i := range 2500 {
		k := fmt.Sprintf("flat/key-%05d", i)
		writeFile(t, filepath.Join(root, "bkt", k), nil) // through POSIX: faster
		want = append(want, k)
	}
	put(t, l, "bkt", "flat/key-00000", []byte("through S3"), objlayer.PutOptions{})
	keys, _ := listAll(t, l, "bkt", "", "", 1000)
	if !slices.Equal(keys, want) {
		t.Fatalf("2,500 keys in pages of 1,000: got %d keys", len(keys))
	}
	keys, _ = listAll(t, l, "bkt", "flat/", "/", 333)
	if !slices.Equal(keys, want) {
		t.Fatalf("2,500 keys in pages of 333: got %d keys", len(keys))
	}
}

func TestListVersionsPaging(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		setVersioning(t, l, "bkt", "Enabled")
		var want []string
		for _, k := range []string{"a", "b", "c/d"} {
			var ids []string
			for i := range 4 {
				ids = append(ids, k+"@"+objlayer.FormatVersionID(putV(t, l, "bkt", k, []byte(fmt.Sprint(i))).VersionID))
			}
			if k == "b" {
				del, err := l.DeleteObject(ctx, "bkt", k, nil, objlayer.DeleteVersioned)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, k+"@"+objlayer.FormatVersionID(del.VersionID))
			}
			slices.Reverse(ids)
			want = append(want, ids...)
		}
		for _, page := range []int{1, 2, 3, 1000} {
			var got []string
			for _, v := range versionPages(t, l, "bkt", page, nil) {
				got = append(got, v.Name+"@"+objlayer.FormatVersionID(v.VersionID))
				if v.IsLatest != isFirst(got, v.Name) {
					t.Fatalf("IsLatest of %s: %v", got[len(got)-1], v.IsLatest)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("page %d:\n got %v\nwant %v", page, got, want)
			}
		}
		// With a delimiter.
		res, err := l.ListObjectVersions(ctx, "bkt", "", "", nil, "/", 1000)
		if err != nil || len(res.CommonPrefixes) != 1 || res.CommonPrefixes[0] != "c/" || len(res.Objects) != 9 {
			t.Fatalf("versions with a delimiter: %v %d %v", res.CommonPrefixes, len(res.Objects), err)
		}
	})
}

// A version listing whose marker version is deleted between its pages
// goes on with the versions made before it (it used to skip the rest of
// the marker key's versions).
func TestListVersionsAfterTheMarkerVersionIsDeleted(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		setVersioning(t, l, "bkt", "Enabled")
		var want []string
		for _, k := range []struct {
			key string
			n   int
		}{{"a", 3}, {"k", 8}, {"z", 2}} {
			var ids []string
			for i := range k.n {
				ids = append(ids, k.key+"@"+objlayer.FormatVersionID(putV(t, l, "bkt", k.key, []byte(fmt.Sprint(i))).VersionID))
			}
			slices.Reverse(ids)
			want = append(want, ids...)
		}
		var got []string
		pages := versionPages(t, l, "bkt", 3, func(keyMarker string, id [16]byte) {
			if _, err := l.DeleteObject(ctx, "bkt", keyMarker, &id, objlayer.DeleteVersioned); err != nil {
				t.Fatal(err)
			}
		})
		for _, v := range pages {
			got = append(got, v.Name+"@"+objlayer.FormatVersionID(v.VersionID))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("marker versions deleted between pages:\n got %v\nwant %v", got, want)
		}
	})
}

// versionPages lists every version of bucket, pageSize a page, and calls
// between, when given, with each page's markers before the next page is
// asked for.
func versionPages(t *testing.T, l *Layer, bucket string, pageSize int, between func(keyMarker string, versionMarker [16]byte)) []objlayer.ObjectInfo {
	t.Helper()
	var all []objlayer.ObjectInfo
	keyMarker, vm := "", (*[16]byte)(nil)
	for {
		res, err := l.ListObjectVersions(ctx, bucket, "", keyMarker, vm, "", pageSize)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, res.Objects...)
		if !res.IsTruncated {
			return all
		}
		id, err := objlayer.ParseVersionID(res.NextVersionMarker)
		if err != nil {
			t.Fatal(err)
		}
		keyMarker, vm = res.NextMarker, &id
		if between != nil {
			between(keyMarker, id)
		}
	}
}

// isFirst reports whether the last version listed is its key's first.
func isFirst(got []string, key string) bool {
	n := 0
	for _, g := range got {
		if strings.HasPrefix(g, key+"@") {
			n++
		}
	}
	return n == 1
}

// Pages of a large directory's listing read it once while it does not
// change, and see a change at once.
func TestListCache(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		l.lists.settle = 0
		for i := range 1500 {
			writeFile(t, filepath.Join(root, "bkt", "d", fmt.Sprintf("k%04d", i)), nil)
		}
		time.Sleep(20 * time.Millisecond) // past the last change's clock tick
		keys, _ := listAll(t, l, "bkt", "d/", "", 100)
		if len(keys) != 1500 || l.lists.hits < 10 {
			t.Fatalf("%d keys, %d pages from the cache", len(keys), l.lists.hits)
		}
		put(t, l, "bkt", "d/k0500a", nil, objlayer.PutOptions{})
		if _, err := l.DeleteObject(ctx, "bkt", "d/k0001", nil, objlayer.DeleteUnversioned); err != nil {
			t.Fatal(err)
		}
		keys, _ = listAll(t, l, "bkt", "d/", "", 100)
		if len(keys) != 1500 || !slices.Contains(keys, "d/k0500a") || slices.Contains(keys, "d/k0001") {
			t.Fatalf("after a change: %d keys", len(keys))
		}
	})
}
