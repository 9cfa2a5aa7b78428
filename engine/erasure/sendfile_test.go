package erasure

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// sendingWriter stands for the HTTP server's writer over plain TCP: it
// takes files through ReadFrom, and counts the bytes that came from one.
type sendingWriter struct {
	bytes.Buffer
	sends     bool
	fromFiles int64
}

func (w *sendingWriter) SendsFiles() bool { return w.sends }

func (w *sendingWriter) ReadFrom(r io.Reader) (int64, error) {
	n, err := w.Buffer.ReadFrom(r)
	if lr, ok := r.(*io.LimitedReader); ok {
		if _, ok := lr.R.(*os.File); ok {
			w.fromFiles += n
		}
	}
	return n, err
}

// A GET into a writer that sends files sends every block read whole from
// this node's drives from the shard files, after their checksums passed,
// for any range; a block rebuilt from parity (a data shard corrupt) goes
// from memory, and so does everything for a writer that would copy.
func TestGetSendsVerifiedBlocksFromFiles(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	data := randomBytes(3<<20 + 12345) // four blocks, the last one short
	tp.put(t, "big", data)
	size := int64(len(data))
	get := func(w *sendingWriter, offset, length int64) []int {
		t.Helper()
		_, bad, err := tp.GetObject(t.Context(), w, "bk", "big", nil, offset, length)
		if err != nil {
			t.Fatalf("GET %d+%d: %v", offset, length, err)
		}
		if !bytes.Equal(w.Bytes(), data[offset:offset+length]) {
			t.Fatalf("GET %d+%d: %d bytes, not the object's", offset, length, w.Len())
		}
		return bad
	}
	ranges := [][2]int64{
		{0, size}, {0, 1}, {size - 1, 1},
		{512<<10 - 3, 10},               // across the two data shards of a block
		{1<<20 - 7, 100},                // across two blocks
		{2<<20 + 5, size - (2<<20 + 5)}, // into the short last block
	}
	for _, r := range ranges {
		w := &sendingWriter{sends: true}
		get(w, r[0], r[1])
		if w.fromFiles != r[1] {
			t.Errorf("GET %d+%d: %d bytes sent from files, want all of them", r[0], r[1], w.fromFiles)
		}
		copying := &sendingWriter{}
		get(copying, r[0], r[1])
		if copying.fromFiles != 0 {
			t.Errorf("GET %d+%d into a writer that copies: %d bytes from files", r[0], r[1], copying.fromFiles)
		}
	}

	// Corrupt a byte of data shard 0 in the second block: that block is
	// rebuilt from parity.
	corrupted := false
	for pos, d := range tp.drives {
		rec, err := d.GetVersion(t.Context(), "bk", "big", nil)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Erasure.Index != 0 {
			continue
		}
		_ = filepath.Walk(filepath.Join(tp.roots[pos], ".strata", "data"), func(path string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			shardBlock := tp.Sets()[0].codec.ShardBlockSize()
			b[shardBlock+4+4+100] ^= 0xff // block 1's data (after block 0 and two checksums)
			corrupted = true
			return os.WriteFile(path, b, 0o644)
		})
	}
	if !corrupted {
		t.Fatal("no shard file of data shard 0 to corrupt")
	}
	w := &sendingWriter{sends: true}
	bad := get(w, 0, size)
	if len(bad) == 0 {
		t.Error("the corrupt shard was not reported for healing")
	}
	// The block before it from files; it, and the blocks after it (the
	// failed shard is not read again, parity is), from memory.
	if want := int64(1 << 20); w.fromFiles != want {
		t.Errorf("GET through a corrupt block: %d bytes sent from files, want %d", w.fromFiles, want)
	}
}
