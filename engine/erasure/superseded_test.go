package erasure

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/hlc"
	"github.com/strata-storage/strata/engine/objlayer"
)

// TestWriteDroppedAsOlderIsNeverAcknowledged: drives drop a null version
// older than the one they hold; such a write is never answered as done.
// The newer version here is stamped one second ahead of this node's clock
// (written through a node whose clock ran ahead). The write is stamped
// again past it and committed, for an inline object and one in shard
// files (whose staged files the drives kept for it): it ends as the
// latest. With no new stamp allowed it fails as ErrWriteQuorum (503,
// retried by clients) wrapping ErrSuperseded, leaves nothing staged, and
// this node's clock has moved past the newer stamp, so the retry wins.
func TestWriteDroppedAsOlderIsNeverAcknowledged(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	var ahead time.Time
	defer func() { time.Sleep(time.Until(ahead)) }() // leave no lead to later tests
	newerThanMine := func(key string, size int) []byte {
		ahead = time.Unix(0, hlc.Default.Peek()).Add(time.Second)
		newer := randomBytes(size)
		if _, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader(newer), int64(size), objlayer.PutOptions{ModTime: ahead}); err != nil {
			t.Fatal(err)
		}
		return newer
	}
	for _, size := range []int{1000, DefaultInlineLimit + 1} {
		key := "k" + string(rune('0'+size%10))
		newerThanMine(key, size)
		mine := randomBytes(size)
		info, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader(mine), int64(size), objlayer.PutOptions{})
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !info.ModTime.After(ahead) {
			t.Fatalf("size %d: stamped %s, not after the newer version's %s", size, info.ModTime, ahead)
		}
		if got := tp.get(t, key); !bytes.Equal(got, mine) {
			t.Fatalf("size %d: the acknowledged write is not what a read returns", size)
		}
	}

	defer func(n int) { maxRestamps = n }(maxRestamps)
	maxRestamps = 0
	for _, size := range []int{1000, DefaultInlineLimit + 1} {
		key := "f" + string(rune('0'+size%10))
		newer := newerThanMine(key, size)
		_, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader(randomBytes(size)), int64(size), objlayer.PutOptions{})
		if !errors.Is(err, objlayer.ErrWriteQuorum) || !errors.Is(err, drive.ErrSuperseded) {
			t.Fatalf("size %d, no new stamp: %v", size, err)
		}
		if p := hlc.Default.Peek(); p < ahead.UnixNano() {
			t.Fatalf("size %d: the clock did not move past the newer stamp (%d < %d)", size, p, ahead.UnixNano())
		}
		if got := tp.get(t, key); !bytes.Equal(got, newer) {
			t.Fatalf("size %d: the failed write changed the object", size)
		}
		for _, d := range tp.drives {
			if left, _ := os.ReadDir(filepath.Join(d.Root(), ".strata", "tmp")); len(left) > 0 {
				t.Fatalf("size %d: staged files left on %s: %d", size, d.Root(), len(left))
			}
		}
	}
}

// TestCompletionDroppedAsOlderIsNeverAcknowledged: a multipart completion
// that the drives drop as older than a null version they hold (they keep
// the upload) is stamped again and completed: it ends as the latest. With
// no new stamp allowed it fails with 503 and the upload is gone from every
// drive.
func TestCompletionDroppedAsOlderIsNeverAcknowledged(t *testing.T) {
	defer func(n int) { maxRestamps = n }(maxRestamps)
	tp := newTestPool(t, 1, 4, 2)
	ctx := t.Context()
	var ahead time.Time
	defer func() { time.Sleep(time.Until(ahead)) }()
	for _, restamps := range []int{8, 0} {
		maxRestamps = restamps
		key := fmt.Sprintf("mp%d", restamps)
		u, err := tp.NewMultipartUpload(ctx, "bk", key, nil)
		if err != nil {
			t.Fatal(err)
		}
		data := randomBytes(300 << 10)
		p, err := tp.PutObjectPart(ctx, "bk", key, u.ID, 1, bytes.NewReader(data), int64(len(data)), objlayer.PartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ahead = time.Unix(0, hlc.Default.Peek()).Add(time.Second)
		newer := randomBytes(1000)
		if _, err := tp.PutObject(ctx, "bk", key, bytes.NewReader(newer), int64(len(newer)), objlayer.PutOptions{ModTime: ahead}); err != nil {
			t.Fatal(err)
		}
		info, err := tp.CompleteMultipartUpload(ctx, "bk", key, u.ID, []objlayer.CompletePart{{Number: 1, ETag: p.ETag}}, objlayer.PutOptions{})
		if restamps > 0 {
			if err != nil {
				t.Fatalf("completion: %v", err)
			}
			if !info.ModTime.After(ahead) {
				t.Fatalf("completion stamped %s, not after the newer version's %s", info.ModTime, ahead)
			}
			if got := tp.get(t, key); !bytes.Equal(got, data) {
				t.Fatal("the acknowledged completion is not what a read returns")
			}
		} else {
			if !errors.Is(err, objlayer.ErrWriteQuorum) || !errors.Is(err, drive.ErrSuperseded) {
				t.Fatalf("completion, no new stamp: %v", err)
			}
			if got := tp.get(t, key); !bytes.Equal(got, newer) {
				t.Fatal("the failed completion changed the object")
			}
			for _, d := range tp.drives {
				if _, err := d.GetUpload(ctx, "bk", key, u.ID); err != nil {
					t.Fatalf("the failed completion lost the upload on %s: %v", d.Root(), err)
				}
			}
			maxRestamps = 8
			if _, err := tp.CompleteMultipartUpload(ctx, "bk", key, u.ID, []objlayer.CompletePart{{Number: 1, ETag: p.ETag}}, objlayer.PutOptions{}); err != nil {
				t.Fatalf("retried completion: %v", err)
			}
			if got := tp.get(t, key); !bytes.Equal(got, data) {
				t.Fatal("the retried completion is not what a read returns")
			}
		}
		for _, d := range tp.drives {
			if _, err := d.GetUpload(ctx, "bk", key, u.ID); !errors.Is(err, drive.ErrUploadNotFound) {
				t.Fatalf("restamps %d: the upload is still on %s: %v", restamps, d.Root(), err)
			}
		}
	}
}
