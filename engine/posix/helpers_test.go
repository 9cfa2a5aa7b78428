package posix

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/objlayer"
)

var ctx = context.Background()

func noXattrs(string) error { return errors.New("xattrs are not supported on this filesystem") }
func xattrsOK(string) error { return nil }

// modes are the metadata modes every behaviour is tested in.
var modes = []MetadataMode{MetadataXattr, MetadataSidecar}

// forModes runs fn once per metadata mode, each on a volume of its own.
func forModes(t *testing.T, fn func(t *testing.T, mode MetadataMode)) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) { fn(t, m) })
	}
}

// open opens a Layer on root in mode (fresh volume or not).
func open(t testing.TB, root string, mode MetadataMode, tweak ...func(*Options)) *Layer {
	t.Helper()
	opts := Options{Root: root, Metadata: mode, probe: xattrsOK, ETagSyncLimit: 1 << 20}
	if mode == MetadataSidecar {
		opts.probe = noXattrs
	}
	for _, f := range tweak {
		f(&opts)
	}
	l, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// volume opens a fresh volume with one bucket.
func volume(t testing.TB, mode MetadataMode, bucket string) (*Layer, string) {
	t.Helper()
	root := t.TempDir()
	l := open(t, root, mode)
	if bucket != "" {
		mkBucket(t, l, bucket, "")
	}
	return l, root
}

func mkBucket(t testing.TB, l *Layer, name, versioning string) {
	t.Helper()
	if err := l.CreateBucket(ctx, objlayer.BucketInfo{Name: name, Owner: "alice", Versioning: versioning}); err != nil {
		t.Fatal(err)
	}
}

func setVersioning(t testing.TB, l *Layer, bucket, state string) {
	t.Helper()
	if err := l.UpdateBucket(ctx, bucket, func(b *objlayer.BucketInfo) { b.Versioning = state }); err != nil {
		t.Fatal(err)
	}
}

// newID is a version ID as the front end makes them.
func newID() [16]byte { return uuid.Must(uuid.NewV7()) }

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func put(t testing.TB, l *Layer, bucket, key string, data []byte, opts objlayer.PutOptions) objlayer.ObjectInfo {
	t.Helper()
	info, err := l.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		t.Fatalf("PUT %s/%s: %v", bucket, key, err)
	}
	return info
}

// putV puts a version with a new ID (a versioning-enabled bucket's write).
func putV(t testing.TB, l *Layer, bucket, key string, data []byte) objlayer.ObjectInfo {
	t.Helper()
	return put(t, l, bucket, key, data, objlayer.PutOptions{VersionID: newID()})
}

// read reads a version whole; its info too.
func read(t testing.TB, l *Layer, bucket, key string, vid *[16]byte) ([]byte, objlayer.ObjectInfo, error) {
	t.Helper()
	h, err := l.OpenObject(ctx, bucket, key, vid)
	if err != nil {
		return nil, objlayer.ObjectInfo{}, err
	}
	defer h.Close()
	var b bytes.Buffer
	if h.Info().DeleteMarker {
		return nil, h.Info(), nil
	}
	if err := h.WriteRange(ctx, &b, 0, -1); err != nil {
		t.Fatalf("reading %s/%s: %v", bucket, key, err)
	}
	return b.Bytes(), h.Info(), nil
}

func mustRead(t testing.TB, l *Layer, bucket, key string, vid *[16]byte) ([]byte, objlayer.ObjectInfo) {
	t.Helper()
	b, info, err := read(t, l, bucket, key, vid)
	if err != nil {
		t.Fatalf("GET %s/%s: %v", bucket, key, err)
	}
	return b, info
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

// attr reads an attribute of a place the way versitygw did: the xattr
// user.<name> of the path, or the sidecar file.
func rawAttr(t testing.TB, l *Layer, p place, name string) ([]byte, bool) {
	t.Helper()
	v, err := l.attrs.get(p, nil, name)
	if errors.Is(err, errNoAttr) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("attribute %s of %s: %v", name, p.path, err)
	}
	return v, true
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// names lists the keys of a listing page.
func names(res objlayer.ListResult) string {
	var out []string
	for _, o := range res.Objects {
		out = append(out, o.Name)
	}
	return strings.Join(out, " ")
}

// listAll pages through ListObjects.
func listAll(t testing.TB, l *Layer, bucket, prefix, delimiter string, page int) ([]string, []string) {
	t.Helper()
	var keys, prefixes []string
	marker := ""
	for {
		res, err := l.ListObjects(ctx, bucket, prefix, marker, delimiter, page)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			keys = append(keys, o.Name)
		}
		prefixes = append(prefixes, res.CommonPrefixes...)
		if !res.IsTruncated {
			return keys, prefixes
		}
		if res.NextMarker <= marker {
			t.Fatalf("listing does not advance: marker %q, next %q", marker, res.NextMarker)
		}
		marker = res.NextMarker
	}
}
