package posix

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Completing a multipart upload across replicas, by versitygw's protocol:
// a completion claims the upload by renaming its directory to
// <uploadId>.<ETag>.inprogress (the ETag the parts named make, so two
// completions of the same parts contend for one name), assembles the
// object from the parts, commits it and removes the claim. A completion
// that fails gives the upload back (renames the claim back).
//
// versitygw answered success to a completion that found another's claim,
// trusting the claimant to finish; a claimant on a replica that died
// never did, and the client was told its upload completed when no object
// ever appeared. So (as the gateway's complete.go did around versitygw) a
// completion that finds a claim waits for it to go: to an object, which
// it answers; or back to the upload, which it completes itself; and a
// claim older than any live assembly of its parts could be is taken over.

const (
	// A live claimant's assembly is bounded by the claim timeout plus its
	// parts' size at claimRate: an older claim is taken over.
	claimRate = 16 << 20 // bytes a second
	// claimPoll is how often a claim is looked at while waiting.
	claimPoll = 200 * time.Millisecond
	// claimGrace is how long past the takeover limit a wait goes on.
	claimGrace  = time.Minute
	claimSuffix = ".inprogress"
)

// errClaimUnsettled answers a completion whose claim neither finished nor
// could be taken over in time: the client retries (503), it is never told
// a completion happened that did not.
var errClaimUnsettled = fmt.Errorf("%w: another completion of this upload is still in progress; retry", objlayer.ErrBusy)

// CompleteMultipartUpload assembles the object from the parts named (in
// ascending order, each but the last at least objlayer.MinPartSize, each
// with the ETag it was uploaded with), its ETag the MD5 of the parts'
// MD5s and "-N", its metadata the upload's (or opts.Meta) with
// objlayer.MetaUploadID, committed as PutObject commits (versioning
// included, a suspended bucket too, which versitygw's completion
// ignored). The parts are copied into the object (copy_file_range: a
// reflink where the filesystem has them), then removed.
func (l *Layer) CompleteMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte, parts []objlayer.CompletePart, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	if err := checkKey(object); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if err := l.contain(bucket, object); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if len(parts) == 0 {
		return objlayer.ObjectInfo{}, fmt.Errorf("%w: no parts", objlayer.ErrInvalidPart)
	}
	for i, p := range parts {
		if p.Number < 1 || i > 0 && p.Number <= parts[i-1].Number {
			return objlayer.ObjectInfo{}, objlayer.ErrInvalidPartOrder
		}
	}
	token, err := claimToken(parts)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	hashDir := filepath.Join(l.bucketPath(bucket), hashRel(object))
	uploadName := objlayer.FormatUploadID(uploadID)
	claimName := uploadName + "." + token + claimSuffix
	var deadline time.Time
	var limit time.Duration
	for {
		err := l.renameUpload(bucket, object, uploadName, claimName)
		if err == nil {
			break
		}
		if !notFound(err) {
			return objlayer.ObjectInfo{}, fmt.Errorf("claiming upload %s: %w", uploadName, err)
		}
		claim, fi := findClaim(hashDir, uploadName)
		if claim == "" {
			if info, ok := l.completedBy(bucket, object, uploadName); ok {
				return info, nil
			}
			return objlayer.ObjectInfo{}, fmt.Errorf("%w: %s", objlayer.ErrUploadNotFound, uploadName)
		}
		if deadline.IsZero() {
			// Read once: the claim's parts are the upload's, whoever holds it.
			limit = l.claimBase + claimLimit(filepath.Join(hashDir, claim))
			deadline = time.Now().Add(limit + claimGrace)
		}
		if time.Now().After(deadline) {
			return objlayer.ObjectInfo{}, errClaimUnsettled
		}
		if age := time.Since(changed(fi)); age > limit {
			// The claimant is gone: give the upload back and complete it
			// here. A rename another replica made first fails; the next
			// round sees its claim.
			if l.renameUpload(bucket, object, claim, uploadName) == nil {
				l.log.Warn("took over a multipart completion claimed long ago", "bucket", bucket, "key", object,
					"claim", claim, "age", age.Round(time.Second))
			}
			continue
		}
		select {
		case <-ctx.Done():
			return objlayer.ObjectInfo{}, ctx.Err()
		case <-time.After(claimPoll):
		}
	}
	info, err := l.assemble(ctx, bucket, object, uploadID, filepath.Join(hashRel(object), claimName), parts, token, opts)
	if err != nil {
		// Give the upload back: a retry may complete it.
		if rerr := l.renameUpload(bucket, object, claimName, uploadName); rerr != nil {
			l.log.Warn("giving a multipart upload back after a failed completion", "bucket", bucket, "key", object, "err", rerr)
		}
		return objlayer.ObjectInfo{}, err
	}
	return info, nil
}

// claimToken is the ETag the parts named make, without quotes, as
// versitygw named a claim after it: the MD5 of their MD5s, "-" and their
// count.
func claimToken(parts []objlayer.CompletePart) (string, error) {
	h := md5.New()
	for _, p := range parts {
		raw, err := hex.DecodeString(strings.ReplaceAll(p.ETag, `"`, ""))
		if err != nil {
			return "", fmt.Errorf("%w: part %d: ETag %q", objlayer.ErrInvalidPart, p.Number, p.ETag)
		}
		h.Write(raw)
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(parts)), nil
}

// renameUpload renames an upload's directory in the key's staging
// directory (claiming or giving it back), with its sidecar attributes.
func (l *Layer) renameUpload(bucket, key, from, to string) error {
	rel := hashRel(key)
	dir := filepath.Join(l.bucketPath(bucket), rel)
	if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
		return err
	}
	if side := l.sideTree(bucket, rel); side != "" {
		err := os.Rename(filepath.Join(side, from), filepath.Join(side, to))
		if err != nil && !notFound(err) {
			_ = os.Rename(filepath.Join(dir, to), filepath.Join(dir, from))
			return err
		}
	}
	return nil
}

// findClaim finds a claim of an upload (any completion's) and its info.
func findClaim(hashDir, uploadName string) (string, os.FileInfo) {
	names, _ := readNames(hashDir)
	for _, n := range names {
		if strings.HasPrefix(n, uploadName+".") && strings.HasSuffix(n, claimSuffix) {
			if fi, err := os.Lstat(filepath.Join(hashDir, n)); err == nil {
				return n, fi
			}
		}
	}
	return "", nil
}

// claimLimit is how long its parts' size lets a live claimant take.
func claimLimit(claim string) time.Duration {
	var size int64
	entries, _ := os.ReadDir(claim)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
	}
	return time.Duration(size / claimRate * int64(time.Second))
}

// changed is when a directory was last renamed (its ctime): for a claim,
// when it was claimed.
func changed(fi os.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fi.ModTime()
}

// completedBy reports whether the key's current version is the upload's
// completion (a completion that was waited for, or a client's retry).
func (l *Layer) completedBy(bucket, key, uploadName string) (objlayer.ObjectInfo, bool) {
	cur, err := l.readCurrent(bucket, key)
	if err != nil || cur == nil || cur.st.mp == nil || cur.st.mp.UploadID != uploadName || cur.st.deleteMarker {
		return objlayer.ObjectInfo{}, false
	}
	return infoOf(bucket, key, cur.fi, cur.st), true
}

// assemble completes a claimed upload (claimRel: its directory, relative
// to the bucket): checks the parts, copies them into a temp file and
// commits it; the claim is removed once the object is in place.
func (l *Layer) assemble(ctx context.Context, bucket, key string, uploadID [16]byte, claimRel string, parts []objlayer.CompletePart, token string, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	chosen := make([]objlayer.PartInfo, len(parts))
	ends := make([]int64, len(parts))
	var size int64
	for i, cp := range parts {
		p, ok, err := l.readPart(bucket, filepath.Join(claimRel, strconv.Itoa(cp.Number)), cp.Number)
		if err != nil {
			return objlayer.ObjectInfo{}, err
		}
		if !ok || unquote(cp.ETag) != p.ETag {
			return objlayer.ObjectInfo{}, fmt.Errorf("%w: part %d", objlayer.ErrInvalidPart, cp.Number)
		}
		if i < len(parts)-1 && p.Size < objlayer.MinPartSize {
			return objlayer.ObjectInfo{}, fmt.Errorf("%w: part %d is %d bytes", objlayer.ErrPartTooSmall, cp.Number, p.Size)
		}
		size += p.Size
		chosen[i], ends[i] = p, size
	}
	uattrs, err := l.attrs.all(l.treePlace(bucket, claimRel), nil)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	src, _ := decodeMeta(uattrs, "")
	if opts.Meta != nil {
		src = opts.Meta
	}
	meta := cloneMeta(src)
	uploadName := objlayer.FormatUploadID(uploadID)
	meta[objlayer.MetaUploadID] = uploadName
	if opts.CompleteParts != nil {
		if err := opts.CompleteParts(chosen, meta); err != nil {
			return objlayer.ObjectInfo{}, err
		}
	}
	tmp, err := createTemp(l.stagingPath(bucket), key)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	defer tmp.discard()
	claimDir := filepath.Join(l.bucketPath(bucket), claimRel)
	for _, p := range chosen {
		if err := appendPart(tmp.File, filepath.Join(claimDir, strconv.Itoa(p.Number))); err != nil {
			return objlayer.ObjectInfo{}, fmt.Errorf("assembling part %d: %w", p.Number, mapNoSpace(err))
		}
	}
	// The ETag is the parts' (token, which also names the claim), or the
	// one the caller keeps (a replica keeps its source's).
	etag := token
	if opts.ETag != "" {
		etag = opts.ETag
	}
	attrs := encodeMeta(meta, &mpRecord{UploadID: uploadName, Parts: ends}, bindOf(etag, size))
	attrs[attrETag] = quote(etag)
	if opts.VersionID != objlayer.NullVersion {
		attrs[attrVersionID] = []byte(versionName(opts.VersionID))
	}
	fi, err := l.commit(ctx, bucket, key, tmp, attrs, opts.VersionID, opts.ModTime, opts.Condition)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if err := os.RemoveAll(claimDir); err != nil {
		l.log.Warn("removing a completed upload's parts", "dir", claimDir, "err", err)
	}
	if side := l.sideTree(bucket, claimRel); side != "" {
		_ = os.RemoveAll(side)
	}
	_ = os.Remove(filepath.Dir(claimDir))
	_, mp := decodeMeta(attrs, "")
	return objlayer.ObjectInfo{Bucket: bucket, Name: key, VersionID: opts.VersionID, ModTime: fi.ModTime().UTC(),
		Size: size, ETag: etag, Meta: meta, Parts: mp.parts()}, nil
}

// appendPart copies a part's bytes to the end of dst (both files: the
// kernel copies, or shares the blocks).
func appendPart(dst *os.File, part string) error {
	src, err := os.Open(part)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %w", objlayer.ErrInvalidPart, err)
		}
		return err
	}
	defer src.Close()
	_, err = io.Copy(dst, src)
	return err
}
