package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
)

// corpus is a set of objects spanning the inline threshold, multi-block
// and multipart objects, written through the S3 API.
type corpus map[string][]byte

func writeCorpus(t *testing.T, s *server, bucket string) corpus {
	t.Helper()
	c := s.aws()
	mustCreateBucket(t, c, bucket)
	objs := corpus{}
	for i, size := range []int{1, 100, 4096, 64 << 10, 128 << 10, 200 << 10, 1 << 20, 3<<20 + 17} {
		for j := 0; j < 3; j++ {
			key := fmt.Sprintf("dir%d/obj-%d-%d", j, i, size)
			objs[key] = randomBytes(size)
			put(t, c, bucket, key, objs[key])
		}
	}
	return objs
}

// checkCorpus reads every object back with both clients.
func checkCorpus(t *testing.T, s *server, bucket string, objs corpus) {
	t.Helper()
	c, mc := s.aws(), s.minio()
	for key, want := range objs {
		if got := get(t, c, bucket, key); !bytes.Equal(got, want) {
			t.Fatalf("aws: %s: %d bytes, want %d identical bytes", key, len(got), len(want))
		}
		o, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatalf("minio: %s: %v", key, err)
		}
		got, err := io.ReadAll(o)
		o.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("minio: %s: %v (%d bytes, want %d)", key, err, len(got), len(want))
		}
	}
}

// wipe removes everything in a drive directory.
func wipe(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// readWithout proves drives healed: it stops the server, wipes the drives
// at the given positions, starts it again and reads every object back.
func readWithout(t *testing.T, s *server, bucket string, objs corpus, wiped ...int) {
	t.Helper()
	s.stop()
	for _, i := range wiped {
		wipe(t, s.drives[i])
	}
	s.restart()
	checkCorpus(t, s, bucket, objs)
}

// corruptShards flips a byte in the middle of every shard file of a drive.
func corruptShards(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, ".strata", "data"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			return err
		}
		b[len(b)/2] ^= 0x5a
		n++
		return os.WriteFile(path, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

type healStatus struct {
	QueueLength  int64    `json:"queueLength"`
	Deferred     int64    `json:"deferred"`
	WritesBehind int64    `json:"writesBehind"`
	Sample       []string `json:"deferredSample"`
	ScanCycles   int64    `json:"scanCycles"`
	Scanning     bool     `json:"scanning"`
	Drives       []struct {
		Set, Index int
		Done       bool
		Error      string
	} `json:"drives"`
}

func (s *server) healStatus() healStatus {
	s.t.Helper()
	code, body := s.adminGet("heal")
	if code != 200 {
		s.t.Fatalf("admin heal: %d %s", code, body)
	}
	var st healStatus
	if err := json.Unmarshal(body, &st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// scan runs an integrity scan through the admin API and waits for its end.
func (s *server) scan(t *testing.T) {
	t.Helper()
	before := s.healStatus().ScanCycles
	if code, body := s.admin(http.MethodPost, "heal"); code != http.StatusAccepted {
		t.Fatalf("starting a scan: %d %s", code, body)
	}
	waitFor(t, "integrity scan done", 60*time.Second, func() bool { return s.healStatus().ScanCycles > before })
}

// waitHealed waits until every drive rebuild is done, the queue empty and
// no write left running on a slow drive.
func (s *server) waitHealed(t *testing.T) {
	t.Helper()
	var st healStatus
	defer func() {
		if t.Failed() {
			t.Logf("last heal status of %s: %+v", s.addr, st)
		}
	}()
	waitFor(t, "healing finished", 60*time.Second, func() bool {
		st = s.healStatus()
		for _, d := range st.Drives {
			if d.Error != "" {
				t.Fatalf("drive heal failed: %+v", d)
			}
			if !d.Done {
				return false
			}
		}
		return st.QueueLength == 0 && st.Deferred == 0 && st.WritesBehind == 0
	})
}

// TestSlowDriveDoesNotHoldUpWrites: one drive of four (2+2) whose every
// write and sync, of shard files and of its metadata store, takes 1 s
// (STRATA_TEST_SLOW_WRITES, the binary's filesystem seam). PUTs, inline
// and streamed, and a DELETE finish at write quorum, each before one of
// that drive's writes would; everything reads back. Once what was left
// running on the slow drive ended and what it missed was healed, the two
// drives that are neither it nor the fourth are wiped, and everything
// still reads back: from the slow drive and the fourth.
func TestSlowDriveDoesNotHoldUpWrites(t *testing.T) {
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "slow")
	s.stop()
	const slow = time.Second
	s.env = append(s.env, "STRATA_TEST_SLOW_WRITES="+slow.String()+":"+s.drives[0]+string(filepath.Separator))
	s.restart()

	objs := corpus{}
	timed := func(what string, fn func()) {
		t.Helper()
		start := time.Now()
		fn()
		took := time.Since(start)
		t.Logf("%s: %v", what, took.Round(time.Millisecond))
		if took >= slow {
			t.Fatalf("%s took %v: it waited for the drive that takes %v per write", what, took, slow)
		}
	}
	for i, size := range []int{100, 4096, 200 << 10, 3<<20 + 17} {
		for j := range 2 {
			key := fmt.Sprintf("obj-%d-%d", i, j)
			objs[key] = randomBytes(size)
			timed(fmt.Sprintf("PUT %s (%d bytes)", key, size), func() { put(t, c, "slow", key, objs[key]) })
		}
	}
	timed("DELETE obj-0-1", func() {
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("slow"), Key: aws.String("obj-0-1")}); err != nil {
			t.Fatal(err)
		}
	})
	delete(objs, "obj-0-1")
	checkCorpus(t, s, "slow", objs)
	s.waitHealed(t)
	s.env = nil // the drive is fast again
	readWithout(t, s, "slow", objs, 1, 2)
}

// TestWipedAndCorruptDrivesHealThemselves is the acceptance test:
// a 4-drive (2+2) server loses one drive entirely and has every shard of
// another corrupted; clients still read correct bytes, the wiped drive
// refills by itself after a restart and the corrupt shards are rebuilt.
// The proof: the two other drives are then wiped, and everything is still
// read back from the healed ones.
func TestWipedAndCorruptDrivesHealThemselves(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	objs := writeCorpus(t, s, "media")
	s.stop()

	wipe(t, s.drives[0])
	if n := corruptShards(t, s.drives[1]); n == 0 {
		t.Fatal("no shard files to corrupt")
	}
	s.restart()
	checkCorpus(t, s, "media", objs) // reads through a wiped and a corrupt drive
	s.waitHealed(t)
	if _, err := os.Stat(filepath.Join(s.drives[0], ".strata", "format.json")); err != nil {
		t.Fatalf("wiped drive not formatted again: %v", err)
	}

	// Reads found the corrupt data shards and queued them for healing;
	// corrupt parity shards, which reads never touch, are found by the
	// integrity scan. Then lose the other two drives.
	s.scan(t)
	s.waitHealed(t)
	readWithout(t, s, "media", objs, 2, 3)
	s.waitHealed(t)
}

// TestDriveWipedWhileRunning: the drive monitor notices a drive whose
// content vanished under a running server, formats it and rebuilds it.
func TestDriveWipedWhileRunning(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	objs := writeCorpus(t, s, "live")
	wipe(t, s.drives[3])
	waitFor(t, "wiped drive formatted again", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(s.drives[3], ".strata", "format.json"))
		return err == nil
	})
	s.waitHealed(t)
	readWithout(t, s, "live", objs, 0, 1)
}

// TestMetadataStoreFailureTakesOnlyItsDriveOffline: a drive whose disk
// fills up under its metadata store (pebble cannot write its log: a
// failure pebble calls fatal) goes offline on its own while the process
// and the other drives keep serving every write. Once the disk has room
// again the drive is reopened and rebuilt: it alone plus one other drive
// then serve everything, including what was written while it was out.
// The drive is a small tmpfs (root; skipped elsewhere outside CI).
func TestMetadataStoreFailureTakesOnlyItsDriveOffline(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		skipOutsideCI(t, "mounting a small filesystem needs root")
	}
	root := t.TempDir()
	small := filepath.Join(root, "small")
	if err := os.MkdirAll(small, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=200m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", small).Run() })
	s := startServer(t, serverOpts{drives: 4, at: map[int]string{4: small}})

	objs := writeCorpus(t, s, "full")
	filler := filepath.Join(small, "filler")
	fill(t, filler)
	// Writes until the store's log rolls over into the full disk (a new
	// log file is preallocated, so the first writes still land).
	c := s.aws()
	n := 0
	for ; n < 2000 && !strings.Contains(s.logs(), "metadata store failed"); n++ {
		key := fmt.Sprintf("while-full/%04d", n)
		objs[key] = randomBytes(60 << 10)
		put(t, c, "full", key, objs[key])
	}
	if !strings.Contains(s.logs(), "metadata store failed") {
		t.Fatalf("%d writes to a full disk and its metadata store never failed", n)
	}
	t.Logf("the store failed after %d writes to the full disk", n)
	waitFor(t, "the drive reported offline", 10*time.Second, func() bool {
		_, body := s.adminGet("info")
		return strings.Contains(string(body), `"state": "offline"`)
	})
	for i := range 20 { // still serving, with the drive out
		key := fmt.Sprintf("while-out/%02d", i)
		objs[key] = randomBytes(1000 + i<<12)
		put(t, c, "full", key, objs[key])
	}
	checkCorpus(t, s, "full", objs)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the drive back online", 30*time.Second, func() bool { return strings.Contains(s.logs(), "drive back online") })
	s.waitHealed(t)
	readWithout(t, s, "full", objs, 0, 1)
}

// fill writes a file until its filesystem is full.
func fill(t *testing.T, name string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestCorruptMetadataStore: a drive whose metadata store is damaged keeps
// the server serving correct bytes, and is set aside and rebuilt.
func TestCorruptMetadataStore(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	objs := writeCorpus(t, s, "meta")
	s.stop()
	meta := filepath.Join(s.drives[2], ".strata", "meta")
	corrupted := 0
	_ = filepath.WalkDir(meta, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "LOCK") || strings.HasPrefix(d.Name(), "OPTIONS") {
			return err
		}
		b, _ := os.ReadFile(path)
		if len(b) > 64 {
			for i := 32; i < len(b); i += 97 {
				b[i] ^= 0xff
			}
			corrupted++
			return os.WriteFile(path, b, 0o644)
		}
		return nil
	})
	if corrupted == 0 {
		t.Fatal("no metadata files to corrupt")
	}
	s.restart()
	checkCorpus(t, s, "meta", objs)
	s.waitHealed(t)
	s.scan(t)
	// The store was replaced and rebuilt: it alone plus one other drive
	// serve everything.
	readWithout(t, s, "meta", objs, 0, 1)
}

// takeOffline makes a drive unopenable (a file where its directory was)
// and returns a function that brings it back.
func takeOffline(t *testing.T, dir string) func() {
	t.Helper()
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a drive"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		_ = os.Remove(dir)
		if err := os.Rename(dir+".away", dir); err != nil {
			t.Fatal(err)
		}
	}
}

// TestParityPlusOneDrivesLost: beyond parity, requests fail with 503
// SlowDown naming the lost quorum, nothing half-written becomes visible,
// and service returns when the drives do.
func TestParityPlusOneDrivesLost(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	put(t, c, "bkt", "before", []byte("safe"))
	put(t, c, "bkt", "big-before", randomBytes(2<<20))
	s.stop()
	var restore []func()
	for _, d := range s.drives[1:] {
		restore = append(restore, takeOffline(t, d))
	}
	s.start0()
	resp, err := http.Get(s.url() + "/strata/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("ready with 1 of 4 drives: %d", resp.StatusCode)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("before")})
	if errCode(err) != "SlowDown" || !strings.Contains(err.Error(), "quorum") {
		t.Fatalf("GET with 1 of 4 drives: %v", err)
	}
	if strings.Contains(err.Error(), s.drives[1]) {
		t.Fatalf("the answer names a drive: %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("during"), Body: strings.NewReader("lost")})
	if errCode(err) != "SlowDown" {
		t.Fatalf("PUT with 1 of 4 drives: %v", err)
	}
	for _, r := range restore {
		r()
	}
	s.waitReady()
	if got := get(t, c, "bkt", "before"); string(got) != "safe" {
		t.Fatalf("after the drives returned: %q", got)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("during")}); err == nil {
		t.Fatal("a PUT that failed for quorum became visible")
	}
}

// slowReader feeds a body slowly so the server can be killed mid-upload.
type slowReader struct {
	data    []byte
	off     int
	started chan struct{}
	once    sync.Once
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	r.once.Do(func() { close(r.started) })
	n := copy(p[:min(len(p), 64<<10)], r.data[r.off:])
	r.off += n
	time.Sleep(2 * time.Millisecond)
	return n, nil
}

// TestKillNineMidUploadLeavesOldOrNew: kill -9 during overwrites leaves
// each object either as it was or as written, never torn, and no staged
// leftovers after the restart.
func TestKillNineMidUploadLeavesOldOrNew(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	old := map[string][]byte{}
	next := map[string][]byte{}
	for i, size := range []int{3000, 100 << 10, 700 << 10, 4 << 20, 24 << 20} {
		key := fmt.Sprintf("k%d", i)
		old[key], next[key] = randomBytes(size), randomBytes(size)
		put(t, c, "bkt", key, old[key])
	}
	var wg sync.WaitGroup
	started := make(chan struct{})
	for key := range old {
		wg.Add(1)
		r := &slowReader{data: next[key], started: make(chan struct{})}
		if len(next[key]) == 24<<20 {
			r.started = started
		}
		go func() {
			defer wg.Done()
			_, _ = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key),
				Body: r, ContentLength: aws.Int64(int64(len(r.data)))})
		}()
	}
	<-started
	time.Sleep(100 * time.Millisecond) // the big upload is under way
	s.kill()
	wg.Wait()
	s.restart()
	for key := range old {
		got := get(t, c, "bkt", key)
		if !bytes.Equal(got, old[key]) && !bytes.Equal(got, next[key]) {
			t.Fatalf("%s is torn after kill -9: %d bytes, neither the old nor the new object", key, len(got))
		}
	}
	for _, d := range s.drives {
		entries, _ := os.ReadDir(filepath.Join(d, ".strata", "tmp"))
		if len(entries) != 0 {
			t.Fatalf("drive %s keeps %d staged leftovers after restart", d, len(entries))
		}
	}
}
