package posix

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Volumes as versitygw's posix backend (behind the gateway's earlier
// releases) laid them out, written here by hand from the layout's
// description (docs/research/versitygw-posix-layout.md): this package must
// read them, and what it writes must be what versitygw reads.

// vgw writes a volume the way the gateway's earlier releases did.
type vgw struct {
	t    *testing.T
	root string
	mode MetadataMode
}

func newVGW(t *testing.T, mode MetadataMode) *vgw {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, ".strata", "gateway.json"),
		[]byte(`{"format":"strata-gateway","version":1,"deploymentID":"00112233445566778899aabbccddeeff","metadata":"`+string(mode)+`"}`+"\n"))
	return &vgw{t: t, root: root, mode: mode}
}

// attr sets an attribute of rel (relative to the root) the way
// versitygw's stores did: user.<name> by path, or the sidecar file
// <root>/.strata/meta/<sidecarRel>/meta/<name> (mode 0600).
func (v *vgw) attr(rel, sidecarRel, name string, value []byte) {
	v.t.Helper()
	if v.mode == MetadataXattr {
		if err := unix.Setxattr(filepath.Join(v.root, rel), "user."+name, value, 0); err != nil {
			v.t.Fatal(err)
		}
		return
	}
	dir := filepath.Join(v.root, ".strata", "meta", sidecarRel, "meta")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		v.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), value, 0o600); err != nil {
		v.t.Fatal(err)
	}
}

// object writes a file at bucket/key with attributes.
func (v *vgw) object(bucket, key string, data []byte, mtime time.Time, attrs map[string]string) {
	v.t.Helper()
	path := filepath.Join(v.root, bucket, key)
	writeFile(v.t, path, data)
	for name, val := range attrs {
		v.attr(filepath.Join(bucket, key), filepath.Join(bucket, key), name, []byte(val))
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			v.t.Fatal(err)
		}
	}
}

// version writes an archived version as versitygw placed it: under the
// versions directory, its sidecar under proc/self/cwd/.strata/versions
// (the path the gateway gave versitygw for it).
func (v *vgw) version(bucket, key, name string, data []byte, mtime time.Time, attrs map[string]string) {
	v.t.Helper()
	h := keyHash(key)
	rel := filepath.Join(".strata", "versions", bucket, h[:2], h[2:4], h[4:6], h, name)
	writeFile(v.t, filepath.Join(v.root, rel), data)
	for n, val := range attrs {
		v.attr(rel, filepath.Join("proc", "self", "cwd", rel), n, []byte(val))
	}
	if err := os.Chtimes(filepath.Join(v.root, rel), mtime, mtime); err != nil {
		v.t.Fatal(err)
	}
}

func ulidAt(at time.Time) string { return ulid.MustNew(ulid.Timestamp(at), rand.Reader).String() }

// vgwChecksumJSON is versitygw's checksums attribute for one algorithm.
func vgwChecksumJSON(alg, typ, value string) string {
	fields := []string{`"Algorithm":"` + alg + `"`, `"Type":"` + typ + `"`}
	for _, a := range checksumAlgorithms {
		if a == alg {
			fields = append(fields, `"`+a+`":"`+value+`"`)
		} else {
			fields = append(fields, `"`+a+`":null`)
		}
	}
	return "{" + strings.Join(fields, ",") + "}"
}

func TestReadsVersitygwVolumes(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		v := newVGW(t, mode)
		if err := os.MkdirAll(filepath.Join(v.root, "legacy"), 0o755); err != nil {
			t.Fatal(err)
		}
		acl := `{"Owner":"alice","Grantees":[{"Permission":"FULL_CONTROL","Access":"alice","Type":"CanonicalUser"}]}`
		lock := `{"Enabled":true,"DefaultRetention":null,"CreatedAt":null}`
		for name, val := range map[string]string{"acl": acl, "ownership": "BucketOwnerPreferred", "versioning": "\x01",
			"X-Amz-Tagging": `{"k":"v"}`, "bucket-lock": lock, "policy": `{"Statement":[]}`, "cors": "<CORSConfiguration/>",
			"strata-lifecycle": `<?xml version="1.0" encoding="UTF-8"?><LifecycleConfiguration></LifecycleConfiguration>`} {
			v.attr("legacy", "legacy", name, []byte(val))
		}
		t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
		A, B, C, D := ulidAt(t0), ulidAt(t0.Add(time.Minute)), ulidAt(t0.Add(2*time.Minute)), ulidAt(t0.Add(3*time.Minute))
		crc := "AAAAAAAAAAA="
		common := func(vid string) map[string]string {
			return map[string]string{"version-id": vid, "checksums": vgwChecksumJSON("CRC64NVME", "FULL_OBJECT", crc),
				"content-type": "text/plain", "metadata": `{"author":"ann"}`}
		}
		vA, vB, vC := common(A), common(B), common(C)
		vA["etag"], vB["etag"], vC["etag"] = `"`+md5hex([]byte("v1"))+`"`, `"`+md5hex([]byte("v2"))+`"`, `"`+md5hex([]byte("v3"))+`"`
		v.version("legacy", "docs/report.txt", A, []byte("v1"), t0.Add(time.Minute), vA)
		v.version("legacy", "docs/report.txt", B, []byte("v2"), t0.Add(2*time.Minute), vB)
		v.version("legacy", "docs/report.txt", C, []byte("v3"), t0.Add(3*time.Minute), vC)
		// versitygw's delete marker: the live file, bytes kept, marked.
		marker := common(D)
		marker["etag"], marker["delete-marker"] = vC["etag"], ""
		v.object("legacy", "docs/report.txt", []byte("v3"), t0.Add(2*time.Minute), marker)
		v.object("legacy", "old-meta", []byte("x"), time.Time{}, map[string]string{"etag": `"` + md5hex([]byte("x")) + `"`,
			"X-Amz-Meta.color": "red", "X-Amz-Meta.size": "XL"})
		uploadID := "3f1c2b7e-3d2a-4c1e-9a77-0c3b5e6f7a81"
		v.object("legacy", "mp", bytes.Repeat([]byte("m"), 5<<20+10), time.Time{}, map[string]string{
			"etag": `"0123456789abcdef0123456789abcdef-2"`, "mp-metadata": `{"uploadId":"` + uploadID + `","parts":[5242880,5242890]}`,
			"object-retention":  `{"XMLName":{"Space":"http://s3.amazonaws.com/doc/2006-03-01/","Local":"Retention"},"Mode":"GOVERNANCE","RetainUntilDate":"2030-01-01T00:00:00Z"}`,
			"object-legal-hold": "\x01", "X-Amz-Tagging": `{"a":"1","b c":"d"}`})
		if err := os.MkdirAll(filepath.Join(v.root, "legacy", "folder"), 0o755); err != nil {
			t.Fatal(err)
		}
		v.attr("legacy/folder", "legacy/folder", "etag", []byte(`"`+emptyMD5+`"`))
		v.attr("legacy/folder", "legacy/folder", "content-type", []byte(dirContentType))

		l := open(t, v.root, MetadataAuto)
		if l.id != "00112233445566778899aabbccddeeff" || l.mode != mode {
			t.Fatalf("the volume's marker: %s %s", l.id, l.mode)
		}
		b, err := l.StatBucket(ctx, "legacy")
		if err != nil || b.Owner != "alice" || string(b.ACL) != acl || string(b.ObjectLock) != lock || b.Versioning != "Enabled" ||
			b.Ownership != "BucketOwnerPreferred" || b.Tags["k"] != "v" || string(b.CORS) != "<CORSConfiguration/>" || !strings.HasPrefix(string(b.Lifecycle), "<?xml") {
			t.Fatalf("bucket: %+v %v", b, err)
		}
		// The marker hides the key; the versions list as versitygw listed them.
		_, info, err := read(t, l, "legacy", "docs/report.txt", nil)
		if err != nil || !info.DeleteMarker || objlayer.FormatULID(info.VersionID) != D {
			t.Fatalf("latest: %+v %v", info, err)
		}
		res, err := l.ListObjectVersions(ctx, "legacy", "docs/", "", nil, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range res.Objects {
			got = append(got, objlayer.FormatULID(o.VersionID))
		}
		if strings.Join(got, " ") != strings.Join([]string{D, C, B, A}, " ") || !res.Objects[0].DeleteMarker || !res.Objects[0].IsLatest ||
			res.Objects[1].ETag != md5hex([]byte("v3")) || res.Objects[1].IsLatest {
			t.Fatalf("versions: %v %+v", got, res.Objects)
		}
		idC, _ := objlayer.ParseVersionID(C)
		body, vinfo := mustRead(t, l, "legacy", "docs/report.txt", &idC)
		if string(body) != "v3" || vinfo.Meta[objlayer.MetaUserPrefix+"author"] != "ann" || vinfo.Meta[objlayer.MetaContentType] != "text/plain" ||
			vinfo.Meta[objlayer.MetaChecksumPrefix+"CRC64NVME"] != crc || vinfo.Meta[objlayer.MetaChecksumType] != "FULL_OBJECT" {
			t.Fatalf("version C: %q %+v", body, vinfo.Meta)
		}
		// Deleting the marker brings the newest version back.
		idD, _ := objlayer.ParseVersionID(D)
		if res, err := l.DeleteObject(ctx, "legacy", "docs/report.txt", &idD, 0); err != nil || !res.DeleteMarker {
			t.Fatalf("deleting versitygw's marker: %+v %v", res, err)
		}
		if body, info := mustRead(t, l, "legacy", "docs/report.txt", nil); string(body) != "v3" || objlayer.FormatULID(info.VersionID) != C {
			t.Fatalf("after the marker: %q %s", body, objlayer.FormatULID(info.VersionID))
		}
		// Legacy user metadata, raw mp-metadata, retention with XMLName.
		_, info = mustRead(t, l, "legacy", "old-meta", nil)
		if info.Meta[objlayer.MetaUserPrefix+"color"] != "red" || info.Meta[objlayer.MetaUserPrefix+"size"] != "XL" {
			t.Fatalf("legacy metadata: %v", info.Meta)
		}
		h, err := l.OpenObjectMeta(ctx, "legacy", "mp", nil)
		if err != nil {
			t.Fatal(err)
		}
		info = h.Info()
		h.Close()
		if info.Meta[objlayer.MetaUploadID] != uploadID || len(info.Parts) != 2 || info.Parts[1].Size != 10 ||
			info.Meta[objlayer.MetaRetention] != `{"Mode":"GOVERNANCE","RetainUntilDate":"2030-01-01T00:00:00Z"}` ||
			info.Meta[objlayer.MetaLegalHold] != "ON" || info.Meta[objlayer.MetaTagging] != "a=1&b+c=d" || info.ETag != "0123456789abcdef0123456789abcdef-2" {
			t.Fatalf("multipart object: %+v", info)
		}
		_, info = mustRead(t, l, "legacy", "folder/", nil)
		if info.ETag != emptyMD5 || info.Meta[objlayer.MetaContentType] != dirContentType {
			t.Fatalf("directory object: %+v", info)
		}
		// Updating legacy user metadata writes versitygw's current form.
		if _, err := l.UpdateObjectMeta(ctx, "legacy", "old-meta", nil, func(m map[string]string) map[string]string {
			m[objlayer.MetaUserPrefix+"color"] = "green"
			return m
		}); err != nil {
			t.Fatal(err)
		}
		p := l.treePlace("legacy", "old-meta")
		if v, _ := rawAttr(t, l, p, "metadata"); string(v) != `{"color":"green","size":"XL"}` {
			t.Fatalf("metadata attribute: %s", v)
		}
		if _, ok := rawAttr(t, l, p, "X-Amz-Meta.color"); ok {
			t.Fatal("legacy attribute left")
		}
	})
}

// The null version of versitygw's listing: before the first archived
// version older than it.
func TestNullVersionOrder(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		v := newVGW(t, mode)
		if err := os.MkdirAll(filepath.Join(v.root, "bkt"), 0o755); err != nil {
			t.Fatal(err)
		}
		v.attr("bkt", "bkt", "versioning", []byte{1})
		t0 := time.Now().Add(-time.Hour)
		F, E, G := ulidAt(t0), ulidAt(t0.Add(2*time.Minute)), ulidAt(t0.Add(3*time.Minute))
		v.version("bkt", "k", F, []byte("F"), t0, map[string]string{"version-id": F})
		v.version("bkt", "k", "null", []byte("null"), t0.Add(time.Minute), nil)
		v.version("bkt", "k", E, []byte("E"), t0.Add(2*time.Minute), map[string]string{"version-id": E})
		v.object("bkt", "k", []byte("G"), t0.Add(3*time.Minute), map[string]string{"version-id": G})
		l := open(t, v.root, MetadataAuto)
		if got := versionsOf(t, l, "bkt", "k"); got != "G* E null F" {
			t.Fatalf("versions: %s", got)
		}
		// Deleting G brings back E, the newest (versitygw: null, the last by name).
		idG, _ := objlayer.ParseVersionID(G)
		if _, err := l.DeleteObject(ctx, "bkt", "k", &idG, 0); err != nil {
			t.Fatal(err)
		}
		if got := versionsOf(t, l, "bkt", "k"); got != "E* null F" {
			t.Fatalf("after deleting the latest: %s", got)
		}
	})
}

// A multipart upload versitygw started (parts with part-crc64nvme, a
// v4 upload ID) continues and completes here.
func TestVersitygwUploadCompletes(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		v := newVGW(t, mode)
		if err := os.MkdirAll(filepath.Join(v.root, "bkt"), 0o755); err != nil {
			t.Fatal(err)
		}
		id := "9b2f4a1e-5c3d-4e7f-8a9b-0c1d2e3f4a5b"
		hash := filepath.Join("bkt", ".sgwtmp", "multipart", keyHash("a/key"))
		if err := os.MkdirAll(filepath.Join(v.root, hash, id), 0o755); err != nil {
			t.Fatal(err)
		}
		v.attr(hash, hash, "objname", []byte("a/key"))
		v.attr(filepath.Join(hash, id), filepath.Join(hash, id), "content-type", []byte("app/x"))
		part := bytes.Repeat([]byte("p"), 5<<20)
		v.object(filepath.Join(hash, id), "1", part, time.Time{}, map[string]string{"etag": `"` + md5hex(part) + `"`,
			"part-crc64nvme": base64.StdEncoding.EncodeToString(crc64.New(crc64.MakeTable(crc64NVME)).Sum(nil))})
		l := open(t, v.root, MetadataAuto)
		res, err := l.ListMultipartUploads(ctx, "bkt", "", "", [16]byte{}, "", 10)
		if err != nil || len(res.Uploads) != 1 || res.Uploads[0].Object != "a/key" || objlayer.FormatUploadID(res.Uploads[0].ID) != id ||
			res.Uploads[0].Meta[objlayer.MetaContentType] != "app/x" {
			t.Fatalf("versitygw's upload: %+v %v", res.Uploads, err)
		}
		uid := res.Uploads[0].ID
		p2, err := l.PutObjectPart(ctx, "bkt", "a/key", uid, 2, strings.NewReader("tail"), 4, objlayer.PartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		info, err := l.CompleteMultipartUpload(ctx, "bkt", "a/key", uid,
			[]objlayer.CompletePart{{Number: 1, ETag: md5hex(part)}, {Number: 2, ETag: p2.ETag}}, objlayer.PutOptions{})
		if err != nil || info.Size != 5<<20+4 || info.Meta[objlayer.MetaContentType] != "app/x" {
			t.Fatalf("completion: %+v %v", info, err)
		}
		// mp-metadata as versitygw writes it: gzip'd JSON of cumulative ends.
		raw, _ := rawAttr(t, l, l.treePlace("bkt", "a/key"), "mp-metadata")
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("mp-metadata is not gzip: %v", err)
		}
		js, _ := io.ReadAll(zr)
		if string(js) != `{"uploadId":"`+id+`","parts":[5242880,5242884]}` {
			t.Fatalf("mp-metadata: %s", js)
		}
	})
}

// What this package writes, attribute by attribute, as versitygw reads it.
func TestWritesVersitygwEncodings(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		setVersioning(t, l, "bkt", "Enabled")
		vid := newID()
		put(t, l, "bkt", "k", []byte("data"), objlayer.PutOptions{VersionID: vid, Meta: map[string]string{
			objlayer.MetaContentType: "text/plain", objlayer.MetaUserPrefix + "b": "2", objlayer.MetaUserPrefix + "a": "<1>",
			objlayer.MetaTagging: "x=1&y=2", objlayer.MetaChecksumPrefix + "SHA256": "c2hh", objlayer.MetaChecksumType: "FULL_OBJECT",
			objlayer.MetaLegalHold: "OFF", objlayer.MetaRetention: `{"Mode":"GOVERNANCE","RetainUntilDate":"2030-01-01T00:00:00Z"}`,
			objlayer.InternalMetaPrefix + "Acl": "doc",
		}})
		p := l.treePlace("bkt", "k")
		want := map[string]string{
			"etag": `"` + md5hex([]byte("data")) + `"`, "version-id": objlayer.FormatULID(vid), "content-type": "text/plain",
			"metadata": `{"a":"\u003c1\u003e","b":"2"}`, "X-Amz-Tagging": `{"x":"1","y":"2"}`,
			"checksums":         vgwChecksumJSON("SHA256", "FULL_OBJECT", "c2hh"),
			"object-legal-hold": "\x00", "object-retention": `{"Mode":"GOVERNANCE","RetainUntilDate":"2030-01-01T00:00:00Z"}`,
			"strata-meta": `{".bind":"` + md5hex([]byte("data")) + `/4","X-Strata-Acl":"doc"}`,
		}
		all, err := l.attrs.all(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range want {
			if string(all[name]) != v {
				t.Errorf("attribute %s = %q, want %q", name, all[name], v)
			}
		}
		if len(all) != len(want) {
			t.Errorf("attributes %v", all)
		}
		// A delete marker; the version it hid archived under its ULID.
		del, err := l.DeleteObject(ctx, "bkt", "k", nil, objlayer.DeleteVersioned)
		if err != nil {
			t.Fatal(err)
		}
		all, _ = l.attrs.all(p, nil)
		if len(all) != 2 || string(all["delete-marker"]) != "" || string(all["version-id"]) != objlayer.FormatULID(del.VersionID) {
			t.Fatalf("delete marker attributes: %q", all)
		}
		h := keyHash("k")
		vpath := filepath.Join(root, ".strata", "versions", "bkt", h[:2], h[2:4], h[4:6], h, objlayer.FormatULID(vid))
		if b, err := os.ReadFile(vpath); err != nil || string(b) != "data" {
			t.Fatalf("archived version: %q %v", b, err)
		}
		if mode == MetadataSidecar {
			side := filepath.Join(root, ".strata", "meta", "proc", "self", "cwd", ".strata", "versions", "bkt", h[:2], h[2:4], h[4:6], h,
				objlayer.FormatULID(vid), "meta", "etag")
			if b, err := os.ReadFile(side); err != nil || string(b) != `"`+md5hex([]byte("data"))+`"` {
				t.Fatalf("archived version's sidecar: %q %v", b, err)
			}
			if fi, err := os.Stat(filepath.Join(root, ".strata", "meta", "bkt", "k", "meta", "delete-marker")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("sidecar file mode: %v %v", fi, err)
			}
		}
		// An upload: staging as versitygw's, the part's CRC-64/NVME.
		u, err := l.NewMultipartUpload(ctx, "bkt", "up", map[string]string{objlayer.MetaContentType: "a/b"})
		if err != nil {
			t.Fatal(err)
		}
		hashRelDir := filepath.Join(".sgwtmp", "multipart", keyHash("up"))
		if v, _ := rawAttr(t, l, l.treePlace("bkt", hashRelDir), "objname"); string(v) != "up" {
			t.Fatalf("objname: %q", v)
		}
		if v, _ := rawAttr(t, l, l.treePlace("bkt", filepath.Join(hashRelDir, objlayer.FormatUploadID(u.ID))), "content-type"); string(v) != "a/b" {
			t.Fatalf("upload's content-type: %q", v)
		}
		if _, err := l.PutObjectPart(ctx, "bkt", "up", u.ID, 1, strings.NewReader("123456789"), 9, objlayer.PartOptions{}); err != nil {
			t.Fatal(err)
		}
		partRel := filepath.Join(hashRelDir, objlayer.FormatUploadID(u.ID), "1")
		crcAttr, _ := rawAttr(t, l, l.treePlace("bkt", partRel), "part-crc64nvme")
		raw, _ := base64.StdEncoding.DecodeString(string(crcAttr))
		if len(raw) != 8 || string(raw) != "\xae\x8b\x14\x86\x0a\x79\x98\x88" { // CRC-64/NVME check value of "123456789"
			t.Fatalf("part-crc64nvme %q", crcAttr)
		}
		if v, _ := rawAttr(t, l, l.treePlace("bkt", partRel), "etag"); string(v) != `"`+md5hex([]byte("123456789"))+`"` {
			t.Fatalf("part etag %q", v)
		}
		var js map[string]any
		if err := json.Unmarshal([]byte(vgwChecksumJSON("CRC32", "", "x")), &js); err != nil {
			t.Fatal(err)
		}
	})
}

// Deletes and commits take versitygw's publish lock, on its file.
func TestPublishLock(t *testing.T) {
	l, root := volume(t, MetadataXattr, "bkt")
	put(t, l, "bkt", "k", []byte("first"), objlayer.PutOptions{})
	path := PublishLockPath(root, "bkt", "k")
	if !strings.HasPrefix(path, filepath.Join(root, ".vgwlocks")+"/") || len(filepath.Base(path)) != 2 {
		t.Fatalf("lock path %s", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, op := range map[string]func() error{
		"PUT": func() error {
			_, err := l.PutObject(ctx, "bkt", "k", strings.NewReader("second"), 6, objlayer.PutOptions{})
			return err
		},
		"DELETE": func() error {
			_, err := l.DeleteObject(ctx, "bkt", "k", nil, objlayer.DeleteUnversioned)
			return err
		},
	} {
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- op() }()
		select {
		case err := <-done:
			t.Fatalf("%s finished (%v) while the key's publish lock was held", name, err)
		case <-time.After(200 * time.Millisecond):
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// An upload's checksum algorithm and type are kept in versitygw's checksums
// attribute (a replica not yet upgraded checks the parts against them), and
// read back from it, ours or versitygw's.
func TestUploadChecksumAlgorithm(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		u, err := l.NewMultipartUpload(ctx, "bkt", "k", map[string]string{
			objlayer.MetaChecksumAlgorithm: "SHA256", objlayer.MetaChecksumType: "COMPOSITE", objlayer.MetaContentType: "a/b"})
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := rawAttr(t, l, l.treePlace("bkt", uploadRel("k", u.ID)), "checksums")
		if !ok || string(raw) != `{"Algorithm":"SHA256","Type":"COMPOSITE","CRC32":null,"CRC32C":null,"SHA1":null,"SHA256":null,"CRC64NVME":null,"SHA512":null,"MD5":null,"XXHASH64":null,"XXHASH3":null,"XXHASH128":null}` {
			t.Fatalf("checksums attribute: %s (%v)", raw, ok)
		}
		got, err := l.StatUpload(ctx, "bkt", "k", u.ID)
		if err != nil || got.Meta[objlayer.MetaChecksumAlgorithm] != "SHA256" || got.Meta[objlayer.MetaChecksumType] != "COMPOSITE" ||
			got.Meta[objlayer.MetaContentType] != "a/b" {
			t.Fatalf("upload read back: %+v %v", got.Meta, err)
		}
	})
}
