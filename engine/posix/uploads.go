package posix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Listing uploads reads the bucket's staging directory: one directory per
// key (named by the key's hash, its objname attribute the key), one per
// upload below it. Uploads being completed (claimed) are not listed.

// upload is an upload found in a bucket's staging directory.
type upload struct {
	key string
	id  [16]byte
	// fi is its directory's (whose time moves with every part).
	fi os.FileInfo
}

// uploads lists a bucket's uploads of keys under prefix, by key, then
// upload ID.
func (l *Layer) uploads(bucket, prefix string) ([]upload, error) {
	dir := filepath.Join(l.bucketPath(bucket), uploadsDir)
	hashes, err := os.ReadDir(dir)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []upload
	for _, h := range hashes {
		if !h.IsDir() {
			continue
		}
		name, err := l.attrs.get(l.treePlace(bucket, filepath.Join(uploadsDir, h.Name())), nil, attrObjName)
		if err != nil || !strings.HasPrefix(string(name), prefix) {
			continue // no key: versitygw's listing skipped it too
		}
		ents, err := os.ReadDir(filepath.Join(dir, h.Name()))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			id, err := uuid.Parse(e.Name())
			if err != nil || id.String() != e.Name() {
				continue // a claim (<id>.<ETag>.inprogress), or not an upload
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			out = append(out, upload{key: string(name), id: id, fi: fi})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key != out[j].key {
			return out[i].key < out[j].key
		}
		return string(out[i].id[:]) < string(out[j].id[:])
	})
	return out, nil
}

// uploadInfo describes an upload with its metadata (ok false: gone meanwhile).
func (l *Layer) uploadInfo(bucket string, u upload) (objlayer.UploadInfo, bool, error) {
	attrs, err := l.attrs.all(l.treePlace(bucket, uploadRel(u.key, u.id)), nil)
	if err != nil {
		if notFound(err) {
			return objlayer.UploadInfo{}, false, nil
		}
		return objlayer.UploadInfo{}, false, err
	}
	meta, _ := decodeMeta(attrs, "")
	return objlayer.UploadInfo{Bucket: bucket, Object: u.key, ID: u.id, Initiated: initiated(u.id, u.fi), Meta: meta}, true, nil
}

// ListMultipartUploads lists uploads in progress by key, then upload ID,
// after (keyMarker, uploadIDMarker) (without an upload-ID marker, after
// every upload of the marker key), grouping keys by delimiter after
// prefix.
func (l *Layer) ListMultipartUploads(ctx context.Context, bucket, prefix, keyMarker string, uploadIDMarker [16]byte, delimiter string, maxUploads int) (objlayer.UploadList, error) {
	var res objlayer.UploadList
	if err := l.contain(bucket, ""); err != nil {
		return res, err
	}
	all, err := l.uploads(bucket, prefix)
	if err != nil {
		return res, err
	}
	afterKey, afterID := keyMarker, uploadIDMarker
	if keyMarker != "" && uploadIDMarker == objlayer.NullVersion {
		afterID = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	if cp, ok := commonPrefix(keyMarker, prefix, delimiter); ok && cp == keyMarker {
		afterKey, afterID = keyMarker+pastPrefix, [16]byte{}
	}
	lastPrefix := ""
	for _, u := range all {
		if keyMarker != "" && (u.key < afterKey || u.key == afterKey && string(u.id[:]) <= string(afterID[:])) {
			continue
		}
		if cp, ok := commonPrefix(u.key, prefix, delimiter); ok {
			if cp == lastPrefix {
				continue
			}
			if len(res.Uploads)+len(res.CommonPrefixes) == maxUploads {
				res.IsTruncated = true
				return res, nil
			}
			res.CommonPrefixes = append(res.CommonPrefixes, cp)
			lastPrefix = cp
			res.NextKeyMarker, res.NextUploadID = cp, objlayer.NullVersion
			continue
		}
		if len(res.Uploads)+len(res.CommonPrefixes) == maxUploads {
			res.IsTruncated = true
			return res, nil
		}
		info, ok, err := l.uploadInfo(bucket, u)
		if err != nil {
			return objlayer.UploadList{}, err
		}
		if !ok {
			continue
		}
		res.Uploads = append(res.Uploads, info)
		res.NextKeyMarker, res.NextUploadID = u.key, u.id
	}
	return res, nil
}

// EachUpload calls fn for every upload in progress of a bucket's keys
// under prefix, by key then upload ID, until fn returns false or an
// error (the gateway's lifecycle aborts incomplete uploads through it).
func (l *Layer) EachUpload(ctx context.Context, bucket, prefix string, fn func(objlayer.UploadInfo) (bool, error)) error {
	if err := l.contain(bucket, ""); err != nil {
		return err
	}
	all, err := l.uploads(bucket, prefix)
	if err != nil {
		return err
	}
	for _, u := range all {
		if err := ctx.Err(); err != nil {
			return err
		}
		info, ok, err := l.uploadInfo(bucket, u)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if goOn, err := fn(info); !goOn || err != nil {
			return err
		}
	}
	return nil
}

// AbortStaleUploads aborts, in every bucket, the uploads whose directory
// has not changed for age (a part linked into it moves its time, so an
// upload still receiving parts is never stale), and returns how many.
// Replicas may run it at the same time: an upload already gone is
// skipped, and one whose time moved since it was looked at is kept.
func (l *Layer) AbortStaleUploads(ctx context.Context, age time.Duration) (int, error) {
	buckets, err := l.ListBuckets(ctx)
	if err != nil {
		return 0, err
	}
	aborted := 0
	for _, b := range buckets {
		all, err := l.uploads(b.Name, "")
		if err != nil {
			return aborted, err
		}
		for _, u := range all {
			if err := ctx.Err(); err != nil {
				return aborted, err
			}
			if time.Since(u.fi.ModTime()) < age {
				continue
			}
			err := l.abortIfUnchanged(b.Name, u)
			switch {
			case err == nil:
				aborted++
			case errors.Is(err, objlayer.ErrUploadNotFound), errors.Is(err, errUploadMoved):
			default:
				return aborted, err
			}
		}
	}
	return aborted, nil
}

// errUploadMoved: a part arrived since the upload was found stale.
var errUploadMoved = errors.New("upload changed")

func (l *Layer) abortIfUnchanged(bucket string, u upload) error {
	fi, err := os.Stat(filepath.Join(l.bucketPath(bucket), uploadRel(u.key, u.id)))
	if err != nil {
		return fmt.Errorf("%w: %s", objlayer.ErrUploadNotFound, objlayer.FormatUploadID(u.id))
	}
	if !fi.ModTime().Equal(u.fi.ModTime()) {
		return errUploadMoved
	}
	return l.removeUpload(bucket, u.key, u.id)
}
