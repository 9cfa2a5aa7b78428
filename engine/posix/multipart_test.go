package posix

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// startUpload starts an upload and stores parts of the sizes given; it
// returns the upload, the completion's parts and the bytes of the object
// they make.
func startUpload(t *testing.T, l *Layer, bucket, key string, meta map[string]string, sizes ...int) (objlayer.UploadInfo, []objlayer.CompletePart, []byte) {
	t.Helper()
	u, err := l.NewMultipartUpload(ctx, bucket, key, meta)
	if err != nil {
		t.Fatal(err)
	}
	var parts []objlayer.CompletePart
	var all []byte
	for i, n := range sizes {
		body := bytes.Repeat([]byte{byte('a' + i)}, n)
		p, err := l.PutObjectPart(ctx, bucket, key, u.ID, i+1, bytes.NewReader(body), int64(n), objlayer.PartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.ETag != md5hex(body) || p.Size != int64(n) {
			t.Fatalf("part %d: %+v", i+1, p)
		}
		parts = append(parts, objlayer.CompletePart{Number: i + 1, ETag: `"` + p.ETag + `"`})
		all = append(all, body...)
	}
	return u, parts, all
}

func multipartETag(parts []objlayer.CompletePart) string {
	h := md5.New()
	for _, p := range parts {
		raw, _ := hex.DecodeString(strings.Trim(p.ETag, `"`))
		h.Write(raw)
	}
	return fmt.Sprintf("%x-%d", h.Sum(nil), len(parts))
}

func TestMultipart(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, root := volume(t, mode, "bkt")
		meta := map[string]string{objlayer.MetaContentType: "video/mp4", objlayer.MetaUserPrefix + "k": "v",
			objlayer.InternalMetaPrefix + "Sse": "AES256"}
		u, parts, data := startUpload(t, l, "bkt", "big/file", meta, objlayer.MinPartSize, 10)
		st, err := l.StatUpload(ctx, "bkt", "big/file", u.ID)
		if err != nil || !maps.Equal(st.Meta, meta) || time.Since(st.Initiated) > time.Minute {
			t.Fatalf("StatUpload: %+v %v", st, err)
		}
		// Parts listed in order, paged.
		_, ps, more, err := l.ListParts(ctx, "bkt", "big/file", u.ID, 0, 1)
		if err != nil || len(ps) != 1 || ps[0].Number != 1 || !more {
			t.Fatalf("ListParts page 1: %+v %v %v", ps, more, err)
		}
		_, ps, more, _ = l.ListParts(ctx, "bkt", "big/file", u.ID, 1, 1)
		if len(ps) != 1 || ps[0].Number != 2 || more {
			t.Fatalf("ListParts page 2: %+v %v", ps, more)
		}
		// Refusals.
		_, err = l.CompleteMultipartUpload(ctx, "bkt", "big/file", u.ID, []objlayer.CompletePart{parts[1], parts[0]}, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrInvalidPartOrder)
		_, err = l.CompleteMultipartUpload(ctx, "bkt", "big/file", u.ID, []objlayer.CompletePart{parts[0], {Number: 3, ETag: parts[1].ETag}}, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrInvalidPart) // part 3 was never uploaded
		_, err = l.CompleteMultipartUpload(ctx, "bkt", "big/file", u.ID, []objlayer.CompletePart{{Number: 1, ETag: md5hex(nil)}}, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrInvalidPart)
		small, sparts, _ := startUpload(t, l, "bkt", "small", nil, 10, 10)
		_, err = l.CompleteMultipartUpload(ctx, "bkt", "small", small.ID, sparts, objlayer.PutOptions{})
		wantErr(t, err, objlayer.ErrPartTooSmall)
		refused := errors.New("checksum mismatch")
		_, err = l.CompleteMultipartUpload(ctx, "bkt", "big/file", u.ID, parts, objlayer.PutOptions{
			CompleteParts: func([]objlayer.PartInfo, map[string]string) error { return refused }})
		wantErr(t, err, refused)
		// The failed completions gave the upload back.
		if _, err := l.StatUpload(ctx, "bkt", "big/file", u.ID); err != nil {
			t.Fatalf("upload after failed completions: %v", err)
		}
		var seen []objlayer.PartInfo
		info, err := l.CompleteMultipartUpload(ctx, "bkt", "big/file", u.ID, parts, objlayer.PutOptions{
			CompleteParts: func(ps []objlayer.PartInfo, m map[string]string) error {
				seen = ps
				m[objlayer.MetaChecksumPrefix+"CRC32"] = "AAAAAA==-2"
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if info.ETag != multipartETag(parts) || info.Size != int64(len(data)) || len(seen) != 2 || seen[1].Size != 10 {
			t.Fatalf("completion: %+v (parts seen %+v)", info, seen)
		}
		got, ginfo := mustRead(t, l, "bkt", "big/file", nil)
		if !bytes.Equal(got, data) || ginfo.ETag != info.ETag || ginfo.Meta[objlayer.MetaUploadID] != objlayer.FormatUploadID(u.ID) ||
			ginfo.Meta[objlayer.MetaContentType] != "video/mp4" || ginfo.Meta[objlayer.InternalMetaPrefix+"Sse"] != "AES256" ||
			ginfo.Meta[objlayer.MetaChecksumPrefix+"CRC32"] != "AAAAAA==-2" {
			t.Fatalf("completed object: %d bytes, %+v", len(got), ginfo)
		}
		if !slices.Equal(ginfo.Parts, []objlayer.Part{{Number: 1, Size: objlayer.MinPartSize}, {Number: 2, Size: 10}}) {
			t.Fatalf("parts of the object: %+v", ginfo.Parts)
		}
		// Gone once completed; a retry of the completion answers the object.
		_, err = l.StatUpload(ctx, "bkt", "big/file", u.ID)
		wantErr(t, err, objlayer.ErrUploadNotFound)
		again, err := l.CompleteMultipartUpload(ctx, "bkt", "big/file", u.ID, parts, objlayer.PutOptions{})
		if err != nil || again.ETag != info.ETag {
			t.Fatalf("a retried completion: %+v %v", again, err)
		}
		if ents, _ := os.ReadDir(filepath.Join(root, "bkt", ".sgwtmp", "multipart")); len(ents) != 1 { // small's
			t.Fatalf("staging left: %d", len(ents))
		}
		// Abort.
		if err := l.AbortMultipartUpload(ctx, "bkt", "small", small.ID); err != nil {
			t.Fatal(err)
		}
		wantErr(t, l.AbortMultipartUpload(ctx, "bkt", "small", small.ID), objlayer.ErrUploadNotFound)
		_, err = l.PutObjectPart(ctx, "bkt", "small", small.ID, 1, strings.NewReader("x"), 1, objlayer.PartOptions{})
		wantErr(t, err, objlayer.ErrUploadNotFound)
	})
}

// TestMultipartKeepsAGivenETag: a completion given an ETag (a replica
// keeps its source's) stores and answers it instead of the parts'.
func TestMultipartKeepsAGivenETag(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		u, parts, data := startUpload(t, l, "bkt", "replica", nil, objlayer.MinPartSize, 10)
		const source = "0123456789abcdef0123456789abcdef-2"
		info, err := l.CompleteMultipartUpload(ctx, "bkt", "replica", u.ID, parts, objlayer.PutOptions{ETag: source})
		if err != nil || info.ETag != source {
			t.Fatalf("completion: %+v %v", info, err)
		}
		got, ginfo := mustRead(t, l, "bkt", "replica", nil)
		if !bytes.Equal(got, data) || ginfo.ETag != source || len(ginfo.Parts) != 2 {
			t.Fatalf("completed object: %d bytes, %+v", len(got), ginfo)
		}
	})
}

func TestMultipartPartOptions(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		u, err := l.NewMultipartUpload(ctx, "bkt", "k", map[string]string{"X-Strata-Key": "secret"})
		if err != nil {
			t.Fatal(err)
		}
		var sawKey string
		p, err := l.PutObjectPart(ctx, "bkt", "k", u.ID, 1, strings.NewReader("plain"), 5, objlayer.PartOptions{
			Body: func(m map[string]string, r io.Reader, size int64) (io.Reader, int64, func() string, error) {
				sawKey = m["X-Strata-Key"]
				b, _ := io.ReadAll(r)
				return bytes.NewReader(bytes.ToUpper(b)), size, func() string { return md5hex([]byte("plain")) }, nil
			},
			Checksum: func() string { return "CRC32:AAAAAA==" },
		})
		if err != nil || sawKey != "secret" || p.ETag != md5hex([]byte("plain")) || p.Checksum != "CRC32:AAAAAA==" {
			t.Fatalf("part: %+v %v (upload key %q)", p, err, sawKey)
		}
		_, ps, _, err := l.ListParts(ctx, "bkt", "k", u.ID, 0, 10)
		if err != nil || len(ps) != 1 || ps[0].Checksum != "CRC32:AAAAAA==" || ps[0].ETag != p.ETag || ps[0].Size != 5 {
			t.Fatalf("listed part: %+v %v", ps, err)
		}
		info, err := l.CompleteMultipartUpload(ctx, "bkt", "k", u.ID, []objlayer.CompletePart{{Number: 1, ETag: p.ETag}}, objlayer.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := mustRead(t, l, "bkt", "k", nil); string(b) != "PLAIN" || info.Meta["X-Strata-Key"] != "secret" {
			t.Fatalf("stored %q, meta %v", b, info.Meta)
		}
	})
}

// Two replicas completing one upload at once: one assembles it, the
// other waits for its claim and answers the same object.
func TestMultipartConcurrentCompletions(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		root := t.TempDir()
		a, b := open(t, root, mode), open(t, root, mode)
		mkBucket(t, a, "bkt", "")
		u, parts, data := startUpload(t, a, "bkt", "k", nil, objlayer.MinPartSize, objlayer.MinPartSize, 100)
		var wg sync.WaitGroup
		infos := make([]objlayer.ObjectInfo, 4)
		errs := make([]error, 4)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := []*Layer{a, b}[i%2]
				infos[i], errs[i] = l.CompleteMultipartUpload(ctx, "bkt", "k", u.ID, parts, objlayer.PutOptions{})
			}()
		}
		wg.Wait()
		for i := range 4 {
			if errs[i] != nil || infos[i].ETag != multipartETag(parts) {
				t.Fatalf("completion %d: %+v %v", i, infos[i], errs[i])
			}
		}
		if got, _ := mustRead(t, b, "bkt", "k", nil); !bytes.Equal(got, data) {
			t.Fatalf("object of %d bytes", len(got))
		}
	})
}

// A completion claimed by a replica that died is taken over once older
// than the claim timeout.
func TestMultipartClaimTakeover(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		root := t.TempDir()
		l := open(t, root, mode, func(o *Options) { o.ClaimTimeout = 300 * time.Millisecond })
		mkBucket(t, l, "bkt", "")
		u, parts, data := startUpload(t, l, "bkt", "k", nil, 100)
		// The dead replica's claim, as versitygw names it.
		hashDir := filepath.Join(root, "bkt", ".sgwtmp", "multipart", keyHash("k"))
		id := objlayer.FormatUploadID(u.ID)
		claim := filepath.Join(hashDir, id+"."+multipartETag(parts)+".inprogress")
		if err := os.Rename(filepath.Join(hashDir, id), claim); err != nil {
			t.Fatal(err)
		}
		if side := l.sideTree("bkt", hashRel("k")); side != "" {
			_ = os.Rename(filepath.Join(side, id), filepath.Join(side, filepath.Base(claim)))
		}
		if _, err := l.StatUpload(ctx, "bkt", "k", u.ID); !errors.Is(err, objlayer.ErrUploadNotFound) {
			t.Fatalf("a claimed upload is not in progress: %v", err)
		}
		if res, _ := l.ListMultipartUploads(ctx, "bkt", "", "", [16]byte{}, "", 100); len(res.Uploads) != 0 {
			t.Fatal("a claimed upload is listed")
		}
		start := time.Now()
		info, err := l.CompleteMultipartUpload(ctx, "bkt", "k", u.ID, parts, objlayer.PutOptions{})
		if err != nil || info.Size != int64(len(data)) {
			t.Fatalf("takeover: %+v %v", info, err)
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Fatalf("completed in %v: the claim was not waited for", took)
		}
		if _, err := os.Stat(claim); !os.IsNotExist(err) {
			t.Fatalf("the dead replica's claim is still there: %v", err)
		}
	})
}

func TestListMultipartUploads(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l, _ := volume(t, mode, "bkt")
		var want []string
		for _, k := range []string{"b", "a", "dir/x", "dir/y", "a"} {
			u, err := l.NewMultipartUpload(ctx, "bkt", k, map[string]string{objlayer.MetaContentType: "t/" + k})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, k+"@"+objlayer.FormatUploadID(u.ID))
		}
		slices.Sort(want) // IDs are time-ordered: by key, then as begun
		var got []string
		keyMarker, idMarker := "", [16]byte{}
		for {
			res, err := l.ListMultipartUploads(ctx, "bkt", "", keyMarker, idMarker, "", 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range res.Uploads {
				if u.Meta[objlayer.MetaContentType] != "t/"+u.Object {
					t.Fatalf("upload metadata: %v", u.Meta)
				}
				got = append(got, u.Object+"@"+objlayer.FormatUploadID(u.ID))
			}
			if !res.IsTruncated {
				break
			}
			keyMarker, idMarker = res.NextKeyMarker, res.NextUploadID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("uploads:\n got %v\nwant %v", got, want)
		}
		res, err := l.ListMultipartUploads(ctx, "bkt", "", "", [16]byte{}, "/", 100)
		if err != nil || len(res.Uploads) != 3 || !slices.Equal(res.CommonPrefixes, []string{"dir/"}) {
			t.Fatalf("with a delimiter: %d %v %v", len(res.Uploads), res.CommonPrefixes, err)
		}
		res, _ = l.ListMultipartUploads(ctx, "bkt", "", "a", [16]byte{}, "", 100)
		if len(res.Uploads) != 3 || res.Uploads[0].Object != "b" {
			t.Fatalf("after key a: %+v", res.Uploads)
		}
		n := 0
		if err := l.EachUpload(ctx, "bkt", "dir/", func(objlayer.UploadInfo) (bool, error) { n++; return true, nil }); err != nil || n != 2 {
			t.Fatalf("EachUpload: %d %v", n, err)
		}
		// Stale uploads: none yet; all of them once old enough.
		if n, err := l.AbortStaleUploads(ctx, time.Hour); err != nil || n != 0 {
			t.Fatalf("aborted %d fresh uploads (%v)", n, err)
		}
		if n, err := l.AbortStaleUploads(ctx, 0); err != nil || n != 5 {
			t.Fatalf("aborted %d of 5 stale uploads (%v)", n, err)
		}
	})
}
