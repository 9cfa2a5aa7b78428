package erasure

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/vfs/faultfs"
)

// uploadTwoParts starts an upload of key and stores a part of MinPartSize
// and a small last one, returning the upload, the parts to complete with
// and the object's data.
func uploadTwoParts(t *testing.T, p *Pool, key string) (objlayer.UploadInfo, []objlayer.CompletePart, []byte) {
	t.Helper()
	ctx := t.Context()
	u, err := p.NewMultipartUpload(ctx, "bk", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	parts, data := putTwoParts(t, p, key, u.ID, nil)
	return u, parts, data
}

// putTwoParts stores a part of MinPartSize and a small last one in upload
// id, each while the drives offline(part) names are away (none when
// offline is nil), returning the parts to complete with and the data.
func putTwoParts(t *testing.T, p *Pool, key string, id [16]byte, offline func(part int) (back func())) ([]objlayer.CompletePart, []byte) {
	t.Helper()
	data := randomBytes(objlayer.MinPartSize + 1000)
	var parts []objlayer.CompletePart
	for i, piece := range [][]byte{data[:objlayer.MinPartSize], data[objlayer.MinPartSize:]} {
		back := func() {}
		if offline != nil {
			back = offline(i + 1)
		}
		info, err := p.PutObjectPart(t.Context(), "bk", key, id, i+1, bytes.NewReader(piece), int64(len(piece)), objlayer.PartOptions{})
		back()
		if err != nil {
			t.Fatalf("part %d: %v", i+1, err)
		}
		parts = append(parts, objlayer.CompletePart{Number: i + 1, ETag: info.ETag})
	}
	return parts, data
}

// checkUploadWhole checks every drive holds the upload with both parts and
// no part file of a version in its directory.
func checkUploadWhole(t *testing.T, drives []*drive.Local, key string, u objlayer.UploadInfo) {
	t.Helper()
	for _, d := range drives {
		if _, err := d.GetUpload(t.Context(), "bk", key, u.ID); err != nil {
			t.Fatalf("the upload is gone from %s: %v", d.Root(), err)
		}
		parts, err := d.ListParts(t.Context(), u.ID)
		if err != nil || len(parts) != 2 {
			t.Fatalf("%s lists %d parts (%v), want 2", d.Root(), len(parts), err)
		}
	}
}

// TestFailedCompletionKeepsTheUpload: a CompleteMultipartUpload that misses
// write quorum answers 503 and leaves the upload as it was, so the
// client's retry completes it (it used to leave the upload on too few
// drives, and the retry got NoSuchUpload). Two ways it fails on a 2+2 set
// (write quorum 3):
//   - two drives fail while completing (renaming a part): the two that
//     completed take the upload back, and the object overwritten is
//     readable again;
//   - a drive missed a part (it was offline when the part was stored) and
//     another is offline at the completion: only two drives hold every
//     part, and nothing is consumed.
//
// And with the missing drive back, a completion through three holders
// succeeds and the drive that missed the part loses the upload and is
// healed. Parts that missed different drives (each on three, two drives
// with both) complete: the drives that missed one complete without it and
// are healed (before, the completion refused, and a client without
// retries failed); when such a completion fails, each drive takes back
// the parts it had.
func TestFailedCompletionKeepsTheUpload(t *testing.T) {
	ctx := t.Context()
	fp := newFaultPool(t, 4, 2)

	t.Run("drives fail while completing", func(t *testing.T) {
		old := randomBytes(1000)
		if _, err := fp.PutObject(ctx, "bk", "mp", bytes.NewReader(old), int64(len(old)), objlayer.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		u, parts, data := uploadTwoParts(t, fp.Pool, "mp")
		fp.fss[0].Fail(faultfs.OpRename, "part.2", nil, 1)
		fp.fss[1].Fail(faultfs.OpRename, "part.2", nil, 1)
		_, err := fp.CompleteMultipartUpload(ctx, "bk", "mp", u.ID, parts, objlayer.PutOptions{})
		if !errors.Is(err, objlayer.ErrWriteQuorum) || !strings.Contains(err.Error(), "reopened on 2 of 2") {
			t.Fatalf("completion with two drives failing: %v", err)
		}
		checkUploadWhole(t, fp.drives, "mp", u)
		if got := readAll(t, fp.Pool, "mp"); !bytes.Equal(got, old) {
			t.Fatal("the object the failed completion overwrote does not read back")
		}
		for _, root := range fp.roots {
			if m, _ := filepath.Glob(filepath.Join(root, "*", "*", "*", "part.[0-9]")); len(m) > 0 {
				t.Fatalf("version part files left after the failed completion: %v", m)
			}
		}
		if _, err := fp.CompleteMultipartUpload(ctx, "bk", "mp", u.ID, parts, objlayer.PutOptions{}); err != nil {
			t.Fatalf("retried completion: %v", err)
		}
		if got := readAll(t, fp.Pool, "mp"); !bytes.Equal(got, data) {
			t.Fatal("the retried completion does not read back")
		}
	})

	t.Run("too few drives hold the parts", func(t *testing.T) {
		u, err := fp.NewMultipartUpload(ctx, "bk", "mp2", nil)
		if err != nil {
			t.Fatal(err)
		}
		data := randomBytes(1000)
		back := offlineSet(fp.set, 0)
		info, err := fp.PutObjectPart(ctx, "bk", "mp2", u.ID, 1, bytes.NewReader(data), int64(len(data)), objlayer.PartOptions{})
		back()
		if err != nil {
			t.Fatal(err)
		}
		parts := []objlayer.CompletePart{{Number: 1, ETag: info.ETag}}
		back = offlineSet(fp.set, 1)
		_, err = fp.CompleteMultipartUpload(ctx, "bk", "mp2", u.ID, parts, objlayer.PutOptions{})
		back()
		if !errors.Is(err, objlayer.ErrWriteQuorum) || !strings.Contains(err.Error(), "the upload is kept") {
			t.Fatalf("completion with two drives holding the part: %v", err)
		}
		for _, d := range fp.drives {
			if _, err := d.GetUpload(ctx, "bk", "mp2", u.ID); err != nil {
				t.Fatalf("the upload is gone from %s: %v", d.Root(), err)
			}
		}
		if _, err := fp.CompleteMultipartUpload(ctx, "bk", "mp2", u.ID, parts, objlayer.PutOptions{}); err != nil {
			t.Fatalf("completion with three drives holding the part: %v", err)
		}
		if got := readAll(t, fp.Pool, "mp2"); !bytes.Equal(got, data) {
			t.Fatal("the completion does not read back")
		}
		if _, err := fp.drives[0].GetUpload(ctx, "bk", "mp2", u.ID); !errors.Is(err, drive.ErrUploadNotFound) {
			t.Fatalf("the drive that missed the part still holds the upload: %v", err)
		}
		if _, err := fp.set.HealObject(ctx, "bk", "mp2", false); err != nil {
			t.Fatal(err)
		}
		back = offlineSet(fp.set, 2, 3)
		defer back()
		if got := readAll(t, fp.Pool, "mp2"); !bytes.Equal(got, data) {
			t.Fatal("the object does not read from the drive that missed its part, healed, and another")
		}
	})
	t.Run("parts missed different drives", func(t *testing.T) {
		var healed []string
		fp.set.OnPartialWrite(func(_, object string, _ [16]byte) { healed = append(healed, object) })
		defer fp.set.OnPartialWrite(nil)
		u, err := fp.NewMultipartUpload(ctx, "bk", "mp3", nil)
		if err != nil {
			t.Fatal(err)
		}
		// An older upload of part 2 reaches every drive; its replacement
		// misses drive 1, which must not complete with the old one.
		first := randomBytes(1000)
		if _, err := fp.PutObjectPart(ctx, "bk", "mp3", u.ID, 2, bytes.NewReader(first), int64(len(first)), objlayer.PartOptions{}); err != nil {
			t.Fatal(err)
		}
		parts, data := putTwoParts(t, fp.Pool, "mp3", u.ID, missDrive(fp.set))
		// Two drives hold both parts; before, the completion refused.
		if _, err := fp.CompleteMultipartUpload(ctx, "bk", "mp3", u.ID, parts, objlayer.PutOptions{}); err != nil {
			t.Fatalf("completion with each part on three drives, different ones: %v", err)
		}
		if len(healed) != 1 || healed[0] != "mp3" {
			t.Fatalf("the completion asked to heal %v, want mp3 once", healed)
		}
		for _, d := range fp.drives {
			if _, err := d.GetUpload(ctx, "bk", "mp3", u.ID); !errors.Is(err, drive.ErrUploadNotFound) {
				t.Fatalf("%s still holds the upload: %v", d.Root(), err)
			}
		}
		// Each part is on three drives: any one may be away.
		for pos := range fp.drives {
			back := offlineSet(fp.set, pos)
			got := readAll(t, fp.Pool, "mp3")
			back()
			if !bytes.Equal(got, data) {
				t.Fatalf("without drive %d the object reads back wrong", pos)
			}
		}
		res, err := fp.set.HealObject(ctx, "bk", "mp3", false)
		if err != nil || res.Shards != 2 {
			t.Fatalf("heal rewrote %d drives' copies (%v), want the 2 that missed a part", res.Shards, err)
		}
		back := offlineSet(fp.set, 2, 3)
		defer back()
		if got := readAll(t, fp.Pool, "mp3"); !bytes.Equal(got, data) {
			t.Fatal("the object does not read from the two drives that missed a part, healed")
		}
	})
	t.Run("a completion with missed parts fails", func(t *testing.T) {
		u, err := fp.NewMultipartUpload(ctx, "bk", "mp4", nil)
		if err != nil {
			t.Fatal(err)
		}
		parts, data := putTwoParts(t, fp.Pool, "mp4", u.ID, missDrive(fp.set))
		fp.fss[2].Fail(faultfs.OpRename, "part.2", nil, 1)
		fp.fss[3].Fail(faultfs.OpRename, "part.2", nil, 1)
		if _, err := fp.CompleteMultipartUpload(ctx, "bk", "mp4", u.ID, parts, objlayer.PutOptions{}); !errors.Is(err, objlayer.ErrWriteQuorum) ||
			!strings.Contains(err.Error(), "reopened on 2 of 2") {
			t.Fatalf("completion with two drives failing: %v", err)
		}
		// Each drive that completed takes back the parts it had, no more.
		for pos, want := range map[int]int{0: 2, 1: 1, 2: 0, 3: 0} {
			listed, err := fp.drives[pos].ListParts(ctx, u.ID)
			if err != nil || want != 0 && (len(listed) != 1 || listed[0].Number != want) || want == 0 && len(listed) != 2 {
				t.Fatalf("drive %d lists parts %+v (%v) after the failed completion", pos, listed, err)
			}
		}
		if _, err := fp.CompleteMultipartUpload(ctx, "bk", "mp4", u.ID, parts, objlayer.PutOptions{}); err != nil {
			t.Fatalf("retried completion: %v", err)
		}
		if got := readAll(t, fp.Pool, "mp4"); !bytes.Equal(got, data) {
			t.Fatal("the retried completion does not read back")
		}
	})
	for _, root := range fp.roots {
		if left, _ := os.ReadDir(filepath.Join(root, ".strata", "tmp")); len(left) > 0 {
			t.Fatalf("staged files left on %s: %d", root, len(left))
		}
	}
}

// missDrive is putTwoParts' offline for parts that miss different drives:
// part 1 misses drive 0, part 2 drive 1.
func missDrive(s *Set) func(part int) func() {
	return func(part int) func() { return offlineSet(s, part-1) }
}

// offlineSet takes the drives at positions of set s away until the
// returned function puts them back.
func offlineSet(s *Set, positions ...int) func() {
	saved := s.Drives()
	for _, p := range positions {
		s.SetDrive(p, nil)
	}
	return func() {
		for _, p := range positions {
			s.SetDrive(p, saved[p])
		}
	}
}

func readAll(t *testing.T, p *Pool, key string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, _, err := p.GetObject(t.Context(), &buf, "bk", key, nil, 0, -1); err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return buf.Bytes()
}
