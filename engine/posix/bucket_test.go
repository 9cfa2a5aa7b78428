package posix

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

func TestBuckets(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		root := t.TempDir()
		l := open(t, root, mode)
		created := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
		in := objlayer.BucketInfo{
			Name: "photos", Created: created, Versioning: "Enabled", Tags: map[string]string{"team": "a", "env": "prod"},
			Owner: "alice", ACL: []byte(`{"Owner":"alice","Grantees":[{"Permission":"READ","Access":"all-users","Type":"Group"}]}`),
			Policy: []byte(`{"Version":"2012-10-17"}`), CORS: []byte("<CORSConfiguration/>"),
			ObjectLock: []byte(`{"Enabled":true,"DefaultRetention":null,"CreatedAt":null}`), Encryption: []byte(`{"mode":"SSE-S3"}`),
			Ownership: "BucketOwnerEnforced", Lifecycle: []byte("<LifecycleConfiguration/>"), PublicAccessBlock: []byte(`{"BlockPublicAcls":true}`),
		}
		if err := l.CreateBucket(ctx, in); err != nil {
			t.Fatal(err)
		}
		wantErr(t, l.CreateBucket(ctx, objlayer.BucketInfo{Name: "photos"}), objlayer.ErrBucketExists)
		got, err := l.StatBucket(ctx, "photos")
		if err != nil {
			t.Fatal(err)
		}
		if !bucketEqual(got, in) {
			t.Fatalf("bucket record:\n got %+v\nwant %+v", got, in)
		}
		// The attributes versitygw reads, as it wrote them.
		p := l.bucketPlace("photos")
		for name, want := range map[string][]byte{
			"versioning": {1}, "X-Amz-Tagging": []byte(`{"env":"prod","team":"a"}`), "acl": in.ACL, "policy": in.Policy,
			"cors": in.CORS, "bucket-lock": in.ObjectLock, "ownership": []byte("BucketOwnerEnforced"),
			"strata-lifecycle": in.Lifecycle, "strata-encryption": in.Encryption, "strata-public-access-block": in.PublicAccessBlock,
		} {
			if v, _ := rawAttr(t, l, p, name); !bytes.Equal(v, want) {
				t.Errorf("attribute %s = %q, want %q", name, v, want)
			}
		}
		// Updates: changed fields written, emptied ones removed, the owner kept in the ACL.
		err = l.UpdateBucket(ctx, "photos", func(b *objlayer.BucketInfo) {
			b.Versioning, b.Tags, b.Policy, b.Owner = "Suspended", nil, nil, "bob"
		})
		if err != nil {
			t.Fatal(err)
		}
		got, _ = l.StatBucket(ctx, "photos")
		if got.Versioning != "Suspended" || got.Tags != nil || got.Policy != nil || got.Owner != "bob" || !got.Created.Equal(created) {
			t.Fatalf("after the update: %+v", got)
		}
		if v, _ := rawAttr(t, l, p, "versioning"); !bytes.Equal(v, []byte{0}) {
			t.Fatalf("suspended: %v", v)
		}
		var acl vgwACL
		if err := json.Unmarshal(got.ACL, &acl); err != nil || acl.Owner != "bob" || len(acl.Grantees) != 1 {
			t.Fatalf("ACL after an owner change: %s", got.ACL)
		}
		// A bucket made without an ACL gets versitygw's: the owner's full control.
		if err := l.CreateBucket(ctx, objlayer.BucketInfo{Name: "owned", Owner: "carol"}); err != nil {
			t.Fatal(err)
		}
		if v, _ := rawAttr(t, l, l.bucketPlace("owned"), "acl"); string(v) != `{"Owner":"carol","Grantees":[{"Permission":"FULL_CONTROL","Access":"carol","Type":"CanonicalUser"}]}` {
			t.Fatalf("a new bucket's ACL: %s", v)
		}
		// Directories made with mkdir are buckets (root's), if their name is one.
		for _, d := range []string{"nas-share", "Not_A_Bucket", "192.168.1.1", "ab"} {
			if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		writeFile(t, filepath.Join(root, "a-file"), nil)
		list, err := l.ListBuckets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, b := range list {
			listed = append(listed, b.Name)
		}
		if strings.Join(listed, " ") != "nas-share owned photos" {
			t.Fatalf("buckets: %v", listed)
		}
		if list[0].Owner != "" || list[0].Created.IsZero() {
			t.Fatalf("a bucket made with mkdir: %+v", list[0])
		}
		// Deletion: not while it holds objects, versions included.
		put(t, l, "photos", "x", []byte("x"), objlayer.PutOptions{VersionID: newID()})
		putV(t, l, "photos", "x", []byte("y"))
		wantErr(t, l.DeleteBucket(ctx, "photos"), objlayer.ErrBucketNotEmpty)
		_ = os.Remove(filepath.Join(root, "photos", "x")) // through POSIX: an archived version is left
		wantErr(t, l.DeleteBucket(ctx, "photos"), objlayer.ErrBucketNotEmpty)
		if err := os.RemoveAll(filepath.Join(root, ".strata", "versions", "photos")); err != nil {
			t.Fatal(err)
		}
		if _, err := l.NewMultipartUpload(ctx, "photos", "upload", nil); err != nil {
			t.Fatal(err)
		}
		if err := l.DeleteBucket(ctx, "photos"); err != nil {
			t.Fatalf("a bucket holding only uploads: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "photos")); !os.IsNotExist(err) {
			t.Fatal("the bucket's directory is still there")
		}
		if mode == MetadataSidecar {
			if _, err := os.Stat(filepath.Join(root, ".strata", "meta", "photos")); !os.IsNotExist(err) {
				t.Fatal("the bucket's sidecar is still there")
			}
		}
		_, err = l.StatBucket(ctx, "photos")
		wantErr(t, err, objlayer.ErrBucketNotFound)
		wantErr(t, l.DeleteBucket(ctx, "photos"), objlayer.ErrBucketNotFound)
		// A new bucket of that name starts clean.
		if err := l.CreateBucket(ctx, objlayer.BucketInfo{Name: "photos"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := l.StatBucket(ctx, "photos"); got.Owner != "" || got.Versioning != "" {
			t.Fatalf("a re-created bucket: %+v", got)
		}
	})
}

func bucketEqual(a, b objlayer.BucketInfo) bool {
	return a.Name == b.Name && a.Created.Equal(b.Created) && a.Versioning == b.Versioning && maps.Equal(a.Tags, b.Tags) &&
		a.Owner == b.Owner && bytes.Equal(a.ACL, b.ACL) && bytes.Equal(a.Policy, b.Policy) && bytes.Equal(a.CORS, b.CORS) &&
		bytes.Equal(a.ObjectLock, b.ObjectLock) && bytes.Equal(a.Encryption, b.Encryption) && a.Ownership == b.Ownership &&
		bytes.Equal(a.Lifecycle, b.Lifecycle) && bytes.Equal(a.PublicAccessBlock, b.PublicAccessBlock)
}

func TestLayout(t *testing.T) {
	root := t.TempDir()
	l, err := prepareLayout(root, MetadataAuto, noXattrs)
	if err != nil {
		t.Fatal(err)
	}
	if l.metadata != MetadataSidecar || !l.detected || l.why == "" {
		t.Fatalf("first start without xattrs: %+v", l)
	}
	// Later starts read the marker, even if xattrs now work.
	l2, err := prepareLayout(root, MetadataAuto, xattrsOK)
	if err != nil || l2.metadata != MetadataSidecar || l2.detected || l2.id != l.id {
		t.Fatalf("second start: %+v %v", l2, err)
	}
	if _, err := prepareLayout(root, MetadataXattr, xattrsOK); err == nil {
		t.Fatal("a mode contradicting the marker was accepted")
	}
	if _, err := prepareLayout(t.TempDir(), MetadataXattr, noXattrs); err == nil {
		t.Fatal("xattr mode on a filesystem without them")
	}
	if l, err := prepareLayout(t.TempDir(), MetadataAuto, probeXattrs); err != nil || l.metadata != MetadataXattr {
		t.Fatalf("the real probe on a filesystem with xattrs: %+v %v", l, err)
	}
	// The gateway's marker, as it writes it.
	other := t.TempDir()
	writeFile(t, filepath.Join(other, ".strata", "gateway.json"),
		[]byte(`{"format":"strata-gateway","version":1,"deploymentID":"0123456789abcdef0123456789abcdef","metadata":"sidecar"}`))
	if l, err := prepareLayout(other, MetadataAuto, xattrsOK); err != nil || l.metadata != MetadataSidecar || l.id != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("an existing volume's marker: %+v %v", l, err)
	}
	if got := versionsSidecarPath("/vol", "/vol/.strata/versions"); got != "proc/self/cwd/.strata/versions" {
		t.Fatalf("versions below the root: %s", got)
	}
	if got := versionsSidecarPath("/vol", "/elsewhere/v"); got != "elsewhere/v" {
		t.Fatalf("versions elsewhere: %s", got)
	}
}

func TestKeyChecks(t *testing.T) {
	for key, ok := range map[string]bool{
		"a": true, "a/b/c.txt": true, "dir/": true, "a..b": true, "..a/b": true, "a/.hidden": true, "a b/ü/✓": true,
		"": false, "..": false, "../a": false, "a/..": false, ".": false, "a/./b": false, "/a": false, "a//b": false,
		"a\x00b": false, ".sgwtmp": false, "x/.sgwtmp/y": false, "dir//": false, "\xff": false,
	} {
		if got := checkKey(key) == nil; got != ok {
			t.Errorf("checkKey(%q) ok=%v, want %v", key, got, ok)
		}
	}
	for prefix, ok := range map[string]bool{
		"": true, "a": true, "a/": true, "a/b": true, "..": true, "../": false, "a//": false, "/": false,
	} {
		if got := prefixCanMatch(prefix); got != ok {
			t.Errorf("prefixCanMatch(%q) = %v, want %v", prefix, got, ok)
		}
	}
	for name, ok := range map[string]bool{
		"abc": true, "a.b-c": true, "my-bucket.1": true, "ab": false, "-ab": false, "ab-": false, "Abc": false,
		"a_b": false, "1.2.3.4": false, ".strata": false, strings.Repeat("a", 64): false,
	} {
		if got := validBucketName(name); got != ok {
			t.Errorf("validBucketName(%q) = %v, want %v", name, got, ok)
		}
	}
}
