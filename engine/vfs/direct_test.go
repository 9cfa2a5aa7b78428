package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Files written past the page cache hold exactly what was written, for
// sizes around the buffer and alignment boundaries and writes of any size,
// and can be read back through the same handle.
func TestCreateDirectWritesExactly(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, 4095, 4096, 4097, 12345, directBufSize - 1, directBufSize, directBufSize + 1, 3*directBufSize + 777}
	for _, size := range sizes {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		name := filepath.Join(dir, "f")
		f, err := CreateDirect(Default, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(*directFile); !ok {
			t.Logf("size %d: the filesystem under %s refused O_DIRECT; checking the fallback", size, dir)
		}
		// The first bytes through the helpers that look for ReadFrom and
		// WriteString, as a server streaming a body in would.
		pre := min(size, 5000)
		if _, err := io.Copy(f, bytes.NewReader(want[:pre/2])); err != nil {
			t.Fatalf("size %d: io.Copy: %v", size, err)
		}
		text := string(want[pre/2 : pre])
		if _, err := io.WriteString(f, text); err != nil {
			t.Fatalf("size %d: io.WriteString: %v", size, err)
		}
		for rest := want[pre:]; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(70000))
			if k, err := f.Write(rest[:n]); err != nil || k != n {
				t.Fatalf("size %d: write %d: %d, %v", size, n, k, err)
			}
			rest = rest[n:]
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("size %d: sync: %v", size, err)
		}
		if size > 0 {
			head := make([]byte, min(size, 10))
			if _, err := f.ReadAt(head, 0); err != nil || !bytes.Equal(head, want[:len(head)]) {
				t.Fatalf("size %d: read back through the handle: %v", size, err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatalf("size %d: close: %v", size, err)
		}
		got, err := os.ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: file holds %d bytes (err %v), want the %d written", size, len(got), err, size)
		}
		if _, err := f.Write([]byte("x")); err == nil {
			t.Fatalf("size %d: a write after Close succeeded", size)
		}
	}
}

// A file written past the page cache holds its buffer only while it
// writes: a write that wrote the buffer out and left a carry's worth gives
// it back, and the next takes one with the bytes carried.
func TestDirectFileGivesItsBufferBack(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	f, err := CreateDirect(Default, name)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := f.(*directFile)
	if !ok {
		// tmpfs and some FUSE filesystems refuse O_DIRECT and get an
		// ordinary file, which has no such buffer to give back.
		f.Close()
		t.Skipf("the filesystem under %s refused O_DIRECT", name)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), (2*directBufSize+directBufSize/2)/16)
	steps := []struct {
		n    int
		held bool
	}{
		{10, true},                   // nothing written out yet
		{directBufSize, false},       // written out, 10 bytes carried
		{directBufSize - 20, true},   // not written out
		{directBufSize/2 + 10, true}, // written out, too much left to carry
	}
	off := 0
	for i, st := range steps {
		if _, err := f.Write(want[off : off+st.n]); err != nil {
			t.Fatal(err)
		}
		off += st.n
		if held := d.buf != nil; held != st.held {
			t.Fatalf("after write %d (%d bytes buffered) the file holds a buffer: %v, want %v", i, d.n, held, st.held)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(name); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes (%v), want the %d written", len(got), err, len(want))
	}
}

// The operating system's files open in fewer calls than os.OpenFile makes
// (openFile), and behave as os's do: a missing file is fs.ErrNotExist and
// no File at all, a file made is read back, a directory syncs.
func TestOSFilesOpen(t *testing.T) {
	dir := t.TempDir()
	f, err := Default.Open(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) || f != nil {
		t.Fatalf("Open of a missing file: %v, %v", f, err)
	}
	name := filepath.Join(dir, "made")
	w, err := Default.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("written")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Default.SyncData(name); err != nil {
		t.Fatal(err)
	}
	if err := Default.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	r, err := Default.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "written" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if err := Default.SyncDir(name); err == nil {
		t.Fatal("a file synced as a directory")
	}
}
