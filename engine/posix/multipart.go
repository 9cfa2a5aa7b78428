package posix

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Multipart uploads, in versitygw's staging layout (replicas of both
// releases take parts of one upload):
//
//	<bucket>/.sgwtmp/multipart/<sha256(key)>/            one per key; attribute objname = the key
//	<bucket>/.sgwtmp/multipart/<sha256(key)>/<uploadId>/ one per upload; attributes = its metadata
//	<bucket>/.sgwtmp/multipart/<sha256(key)>/<uploadId>/<N>   part N
//	<bucket>/.sgwtmp/multipart/<sha256(key)>/<uploadId>.<ETag>.inprogress/   claimed by a completion
//
// Upload IDs are UUIDs; this release makes them time-ordered (v7), so an
// upload's ID also says when it began.

// crc64NVME is the CRC-64/NVME polynomial (reversed), whose checksum of a
// part versitygw keeps in part-crc64nvme to derive the object's.
const crc64NVME = 0x9a6c9329ac4bc9b5

// hashRel is the staging directory of a key's uploads, relative to its
// bucket.
func hashRel(key string) string { return filepath.Join(uploadsDir, keyHash(key)) }

// uploadRel is an upload's directory, relative to its bucket.
func uploadRel(key string, id [16]byte) string {
	return filepath.Join(hashRel(key), objlayer.FormatUploadID(id))
}

// initiated is when an upload began: its ID's time for a time-ordered ID,
// its directory's modification time otherwise (versitygw's, which moves
// with every part).
func initiated(id [16]byte, fi os.FileInfo) time.Time {
	if uuid.UUID(id).Version() == 7 {
		ms := int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 | int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])
		return time.UnixMilli(ms).UTC()
	}
	return fi.ModTime().UTC()
}

// NewMultipartUpload starts an upload of a key, keeping meta as the
// upload's attributes.
func (l *Layer) NewMultipartUpload(ctx context.Context, bucket, object string, meta map[string]string) (objlayer.UploadInfo, error) {
	if err := checkKey(object); err != nil {
		return objlayer.UploadInfo{}, err
	}
	if err := l.contain(bucket, object); err != nil {
		return objlayer.UploadInfo{}, err
	}
	if strings.HasSuffix(object, "/") {
		return objlayer.UploadInfo{}, fmt.Errorf("%w: %s names a directory, which holds no data", objlayer.ErrInvalidKey, object)
	}
	if err := l.keyFree(bucket, object); err != nil {
		return objlayer.UploadInfo{}, err
	}
	id := uuid.Must(uuid.NewV7())
	rel := uploadRel(object, id)
	dir := filepath.Join(l.bucketPath(bucket), rel)
	if err := mkdirBelow(l.bucketPath(bucket), dir); err != nil {
		return objlayer.UploadInfo{}, mapNoSpace(err)
	}
	fail := func(err error) (objlayer.UploadInfo, error) {
		_ = os.RemoveAll(dir)
		_ = os.Remove(filepath.Dir(dir))
		if side := l.sideTree(bucket, rel); side != "" {
			_ = os.RemoveAll(side)
		}
		return objlayer.UploadInfo{}, mapNoSpace(err)
	}
	if err := l.attrs.set(l.treePlace(bucket, hashRel(object)), nil, attrObjName, []byte(object)); err != nil {
		return fail(err)
	}
	p := l.treePlace(bucket, rel)
	for name, v := range encodeMeta(meta, nil, "") {
		if err := l.attrs.set(p, nil, name, v); err != nil {
			return fail(err)
		}
	}
	if l.fsync {
		for d := dir; d != l.bucketPath(bucket); d = filepath.Dir(d) {
			if err := syncDir(d); err != nil {
				return fail(err)
			}
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fail(err)
	}
	return objlayer.UploadInfo{Bucket: bucket, Object: object, ID: id, Initiated: initiated(id, fi), Meta: cloneMeta(meta)}, nil
}

// StatUpload returns an upload in progress (ErrUploadNotFound: never
// started, completed, aborted, or being completed).
func (l *Layer) StatUpload(ctx context.Context, bucket, object string, uploadID [16]byte) (objlayer.UploadInfo, error) {
	u, _, err := l.statUpload(bucket, object, uploadID)
	return u, err
}

// statUpload is StatUpload, with the upload's attributes.
func (l *Layer) statUpload(bucket, object string, id [16]byte) (objlayer.UploadInfo, map[string][]byte, error) {
	if err := checkKey(object); err != nil {
		return objlayer.UploadInfo{}, nil, err
	}
	if err := l.contain(bucket, ""); err != nil {
		return objlayer.UploadInfo{}, nil, err
	}
	p := l.treePlace(bucket, uploadRel(object, id))
	fi, err := os.Stat(p.path)
	if err != nil || !fi.IsDir() {
		return objlayer.UploadInfo{}, nil, fmt.Errorf("%w: %s", objlayer.ErrUploadNotFound, objlayer.FormatUploadID(id))
	}
	attrs, err := l.attrs.all(p, nil)
	if err != nil {
		return objlayer.UploadInfo{}, nil, err
	}
	meta, _ := decodeMeta(attrs, "")
	return objlayer.UploadInfo{Bucket: bucket, Object: object, ID: id, Initiated: initiated(id, fi), Meta: meta}, attrs, nil
}

// PutObjectPart stores part number of an upload, replacing an earlier
// upload of that number: a temp file in the key's staging directory,
// linked into the upload's directory with its attributes (its quoted MD5
// ETag, its CRC-64/NVME, its checksum). A part whose upload is claimed or
// aborted meanwhile is refused (ErrUploadNotFound).
func (l *Layer) PutObjectPart(ctx context.Context, bucket, object string, uploadID [16]byte, number int, r io.Reader, size int64, opts objlayer.PartOptions) (objlayer.PartInfo, error) {
	if number < 1 || number > objlayer.MaxParts {
		return objlayer.PartInfo{}, fmt.Errorf("%w: part number %d", objlayer.ErrInvalidPart, number)
	}
	u, uattrs, err := l.statUpload(bucket, object, uploadID)
	if err != nil {
		return objlayer.PartInfo{}, err
	}
	var etagOf func() string
	if opts.Body != nil {
		if r, size, etagOf, err = opts.Body(u.Meta, r, size); err != nil {
			return objlayer.PartInfo{}, err
		}
	}
	partRel := filepath.Join(uploadRel(object, uploadID), strconv.Itoa(number))
	pending := &pendingTemp{dir: filepath.Join(l.bucketPath(bucket), hashRel(object)), key: partRel}
	defer pending.discard()
	crc := crc64.New(crc64.MakeTable(crc64NVME))
	n, sum, err := l.readBody(io.MultiWriter(pending, crc), r, size, etagOf == nil)
	if err != nil {
		return objlayer.PartInfo{}, err
	}
	tmp, err := pending.file()
	if err != nil {
		return objlayer.PartInfo{}, err
	}
	part := objlayer.PartInfo{Number: number, Size: n, ETag: sum}
	if etagOf != nil {
		part.ETag = etagOf()
	}
	if opts.Checksum != nil {
		part.Checksum = opts.Checksum()
	}
	attrs := map[string][]byte{
		attrETag:    quote(part.ETag),
		attrPartCRC: []byte(base64.StdEncoding.EncodeToString(crc.Sum(nil))),
	}
	if part.Checksum != "" {
		attrs[attrPartChecksum] = []byte(part.Checksum)
		if v := vgwPartChecksum(uattrs, part.Checksum); v != nil {
			attrs[attrChecksums] = v
		}
	}
	if err := l.prepare(tmp, attrs, time.Time{}); err != nil {
		return objlayer.PartInfo{}, err
	}
	fi, err := tmp.Stat()
	if err != nil {
		return objlayer.PartInfo{}, err
	}
	part.ModTime = fi.ModTime().UTC()
	if l.attrs.isSidecar() {
		p := l.treePlace(bucket, partRel)
		have, err := l.attrs.all(p, nil)
		if err == nil {
			err = replaceAttrs(l.attrs, p, nil, have, attrs, func(string) bool { return true })
		}
		if err != nil {
			return objlayer.PartInfo{}, mapNoSpace(err)
		}
	}
	if err := tmp.publish(filepath.Join(l.bucketPath(bucket), partRel), ""); err != nil {
		if notFound(err) {
			return objlayer.PartInfo{}, fmt.Errorf("%w: %s", objlayer.ErrUploadNotFound, objlayer.FormatUploadID(uploadID))
		}
		return objlayer.PartInfo{}, mapNoSpace(err)
	}
	if l.fsync {
		if err := syncDir(filepath.Join(l.bucketPath(bucket), uploadRel(object, uploadID))); err != nil {
			return objlayer.PartInfo{}, err
		}
	}
	return part, nil
}

// vgwPartChecksum is a part's checksum as versitygw keeps it, for an
// upload created with that algorithm (its checksums attribute says so):
// a replica not yet upgraded completing the upload checks the parts'
// checksums against it. nil otherwise (versitygw kept none then, and its
// completion refuses parts that have one).
func vgwPartChecksum(uploadAttrs map[string][]byte, checksum string) []byte {
	var up vgwChecksum
	if json.Unmarshal(uploadAttrs[attrChecksums], &up) != nil || up.Type == "" {
		return nil
	}
	alg, value, ok := strings.Cut(checksum, ":")
	var c vgwChecksum
	if !ok || alg != up.Algorithm || c.field(alg) == nil {
		return nil
	}
	c.Algorithm = alg
	*c.field(alg) = &value
	b, _ := json.Marshal(&c)
	return b
}

// partChecksum is a part's checksum as the front end gave it: ours, or
// versitygw's of a part it stored.
func partChecksum(attrs map[string][]byte) string {
	if v, ok := attrs[attrPartChecksum]; ok {
		return string(v)
	}
	var c vgwChecksum
	if json.Unmarshal(attrs[attrChecksums], &c) != nil || c.Algorithm == "" || c.field(c.Algorithm) == nil {
		return ""
	}
	if v := *c.field(c.Algorithm); v != nil {
		return c.Algorithm + ":" + *v
	}
	return ""
}

// ListParts lists an upload's parts after partMarker, at most maxParts,
// in part order; the bool reports more.
func (l *Layer) ListParts(ctx context.Context, bucket, object string, uploadID [16]byte, partMarker, maxParts int) (objlayer.UploadInfo, []objlayer.PartInfo, bool, error) {
	u, _, err := l.statUpload(bucket, object, uploadID)
	if err != nil {
		return objlayer.UploadInfo{}, nil, false, err
	}
	rel := uploadRel(object, uploadID)
	numbers, err := partNumbers(filepath.Join(l.bucketPath(bucket), rel))
	if err != nil {
		return objlayer.UploadInfo{}, nil, false, err
	}
	var out []objlayer.PartInfo
	for _, n := range numbers {
		if n <= partMarker {
			continue
		}
		if len(out) == maxParts {
			return u, out, true, nil
		}
		p, ok, err := l.readPart(bucket, filepath.Join(rel, strconv.Itoa(n)), n)
		if err != nil {
			return objlayer.UploadInfo{}, nil, false, err
		}
		if ok {
			out = append(out, p)
		}
	}
	return u, out, false, nil
}

// partNumbers are the part numbers present in an upload's directory, in
// order.
func partNumbers(dir string) ([]int, error) {
	names, err := readNames(dir)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, name := range names {
		if n, err := strconv.Atoi(name); err == nil && n > 0 && strconv.Itoa(n) == name {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// readPart reads a part (rel: relative to the bucket); ok is false when
// it is gone.
func (l *Layer) readPart(bucket, rel string, number int) (objlayer.PartInfo, bool, error) {
	p := l.treePlace(bucket, rel)
	fi, err := os.Lstat(p.path)
	switch {
	case notFound(err):
		return objlayer.PartInfo{}, false, nil
	case err != nil:
		return objlayer.PartInfo{}, false, err
	case !fi.Mode().IsRegular():
		return objlayer.PartInfo{}, false, nil
	}
	attrs, err := l.attrs.all(p, nil)
	if err != nil {
		if notFound(err) {
			return objlayer.PartInfo{}, false, nil
		}
		return objlayer.PartInfo{}, false, err
	}
	return objlayer.PartInfo{Number: number, ModTime: fi.ModTime().UTC(), Size: fi.Size(),
		ETag: unquote(string(attrs[attrETag])), Checksum: partChecksum(attrs)}, true, nil
}

// AbortMultipartUpload discards an upload and its parts
// (ErrUploadNotFound when there is none, or it is being completed).
func (l *Layer) AbortMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte) error {
	if _, _, err := l.statUpload(bucket, object, uploadID); err != nil {
		return err
	}
	return l.removeUpload(bucket, object, uploadID)
}

// removeUpload removes an upload's directory, its attributes and, when it
// was the key's last, the key's staging directory (versitygw left the
// latter's sidecar attribute: so does this, since another upload of the
// key may be starting).
func (l *Layer) removeUpload(bucket, object string, id [16]byte) error {
	rel := uploadRel(object, id)
	if err := os.RemoveAll(filepath.Join(l.bucketPath(bucket), rel)); err != nil {
		return err
	}
	if side := l.sideTree(bucket, rel); side != "" {
		if err := os.RemoveAll(side); err != nil {
			return err
		}
	}
	_ = os.Remove(filepath.Join(l.bucketPath(bucket), hashRel(object)))
	return nil
}
