package erasure

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// cutShort does what a completion's coordinator killed on its way leaves:
// the drives at positions completed upload u of key as the coordinator
// asked them (the version stamped modTime, made of every part), the
// others still hold the upload. It returns the version's record.
func cutShort(t *testing.T, fp *faultPool, key string, u objlayer.UploadInfo, modTime time.Time, positions ...int) *drive.Record {
	t.Helper()
	ctx := t.Context()
	up, err := fp.drives[0].GetUpload(ctx, "bk", key, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := fp.drives[0].ListParts(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec := &drive.Record{ModTime: modTime.UnixNano(), Meta: map[string]string{objlayer.MetaUploadID: uuid.UUID(u.ID).String()},
		DataDir: up.DataDir, Erasure: up.Erasure}
	etags := md5.New()
	for _, p := range parts {
		raw, err := hex.DecodeString(p.ETag)
		if err != nil {
			t.Fatal(err)
		}
		etags.Write(raw)
		rec.Size += p.Size
		rec.Parts = append(rec.Parts, drive.Part{Number: p.Number, Size: p.Size, ETag: p.ETag})
	}
	rec.ETag = fmt.Sprintf("%x-%d", etags.Sum(nil), len(parts))
	for _, pos := range positions {
		if _, err := fp.drives[pos].CompleteUpload(ctx, up, parts, ownRecord(rec, pos, nil)); err != nil {
			t.Fatal(err)
		}
	}
	return rec
}

// holdingUpload lists the drives that still hold upload id of key.
func holdingUpload(t *testing.T, fp *faultPool, key string, id [16]byte) []int {
	t.Helper()
	var out []int
	for pos, d := range fp.drives {
		if _, err := d.GetUpload(t.Context(), "bk", key, id); err == nil {
			out = append(out, pos)
		} else if !errors.Is(err, drive.ErrUploadNotFound) {
			t.Fatal(err)
		}
	}
	return out
}

// TestACompletionCutShortIsResumed: on a 6+2 set over four nodes of two
// drives (write and read quorum 6), a completion's coordinator is killed
// after three drives committed it, and its node's two drives are away. In
// a soak, the SDK's retry on another node got NoSuchUpload: the three
// drives that committed counted as lacking the upload, and the version,
// on three drives, could not be read. After DanglingGrace the heal rolled
// the version back, and the upload was lost.
//   - The retry finishes the completion on the three drives still
//     holding the upload, with the committed record: the object reads
//     back with the node away; once it returns, the heal gives its drives
//     the version and drops the upload they kept.
//   - Left alone, the heal finishes it after DanglingGrace instead of
//     rolling it back.
//   - With too few drives to finish (three committed, two holding the
//     upload), the retry is a retryable ErrWriteQuorum, nothing changes,
//     and it succeeds once the drives return.
func TestACompletionCutShortIsResumed(t *testing.T) {
	ctx := t.Context()
	fp := newFaultPool(t, 8, 2)

	t.Run("the retry finishes it", func(t *testing.T) {
		u, parts, data := uploadTwoParts(t, fp.Pool, "mp")
		rec := cutShort(t, fp, "mp", u, time.Now(), 0, 1, 2)
		back := offlineSet(fp.set, 6, 7)
		info, err := fp.CompleteMultipartUpload(ctx, "bk", "mp", u.ID, parts, objlayer.PutOptions{})
		if err != nil {
			back()
			t.Fatalf("the retried completion: %v", err)
		}
		if info.ETag != rec.ETag || info.ModTime.UnixNano() != rec.ModTime || info.Size != int64(len(data)) {
			t.Fatalf("the retry answered %s %v %d, the committed version is %s %v %d", info.ETag, info.ModTime, info.Size, rec.ETag, time.Unix(0, rec.ModTime), rec.Size)
		}
		got := readAll(t, fp.Pool, "mp")
		back()
		if !bytes.Equal(got, data) {
			t.Fatal("the resumed completion does not read back")
		}
		if held := holdingUpload(t, fp, "mp", u.ID); len(held) != 2 || held[0] != 6 {
			t.Fatalf("drives %v hold the upload, want the 2 away", held)
		}
		// The first coordinator, had it lived, completing a drive the
		// retry completed, is told it is done.
		up, _ := fp.drives[6].GetUpload(ctx, "bk", "mp", u.ID)
		if _, err := fp.drives[3].CompleteUpload(ctx, up, nil, ownRecord(rec, 3, nil)); err != nil {
			t.Fatalf("completing again a drive that completed: %v", err)
		}
		other := ownRecord(rec, 3, nil)
		other.VersionID = uuid.New()
		if _, err := fp.drives[3].CompleteUpload(ctx, up, nil, other); !errors.Is(err, drive.ErrUploadNotFound) {
			t.Fatalf("completing as another version a drive that completed: %v", err)
		}
		res, err := fp.set.HealObject(ctx, "bk", "mp", false)
		if err != nil || res.Shards != 2 {
			t.Fatalf("heal rewrote %d drives' copies (%v), want the 2 that were away", res.Shards, err)
		}
		if held := holdingUpload(t, fp, "mp", u.ID); len(held) != 0 {
			t.Fatalf("drives %v still hold the upload after the heal", held)
		}
		back = offlineSet(fp.set, 0, 1)
		defer back()
		if got := readAll(t, fp.Pool, "mp"); !bytes.Equal(got, data) {
			t.Fatal("the object does not read from the drives that were away, healed")
		}
	})

	t.Run("the heal finishes it", func(t *testing.T) {
		u, _, data := uploadTwoParts(t, fp.Pool, "mp2")
		cutShort(t, fp, "mp2", u, time.Now().Add(-DanglingGrace-time.Minute), 0, 1, 2)
		res, err := fp.set.HealObject(ctx, "bk", "mp2", false)
		if err != nil || res.Purged != 0 || res.Shards != 5 {
			t.Fatalf("heal: %+v (%v), want the completion finished on 5 drives", res, err)
		}
		if held := holdingUpload(t, fp, "mp2", u.ID); len(held) != 0 {
			t.Fatalf("drives %v still hold the upload after the heal", held)
		}
		back := offlineSet(fp.set, 3, 4)
		defer back()
		if got := readAll(t, fp.Pool, "mp2"); !bytes.Equal(got, data) {
			t.Fatal("the completion the heal finished does not read back")
		}
	})

	t.Run("too few drives to finish it", func(t *testing.T) {
		u, parts, data := uploadTwoParts(t, fp.Pool, "mp3")
		cutShort(t, fp, "mp3", u, time.Now(), 0, 1, 2)
		back := offlineSet(fp.set, 5, 6, 7)
		_, err := fp.CompleteMultipartUpload(ctx, "bk", "mp3", u.ID, parts, objlayer.PutOptions{})
		back()
		if !errors.Is(err, objlayer.ErrWriteQuorum) {
			t.Fatalf("completion with 3 drives committed and 2 holding the upload: %v, want ErrWriteQuorum", err)
		}
		if held := holdingUpload(t, fp, "mp3", u.ID); len(held) != 5 {
			t.Fatalf("drives %v hold the upload, want the 5 that did not commit", held)
		}
		if _, err := fp.CompleteMultipartUpload(ctx, "bk", "mp3", u.ID, parts, objlayer.PutOptions{}); err != nil {
			t.Fatalf("the completion retried with every drive back: %v", err)
		}
		if got := readAll(t, fp.Pool, "mp3"); !bytes.Equal(got, data) {
			t.Fatal("the resumed completion does not read back")
		}
	})
}
