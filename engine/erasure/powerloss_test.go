package erasure

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	randv2 "math/rand/v2"
	"os"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/vfs"
)

// memVFS is the engine's filesystem seam over pebble's in-memory
// filesystem, which can be cloned as a power loss would leave it: what was
// synced (files' data, directories' entries) and, at random, some of what
// was not.
type memVFS struct{ m *pebblevfs.MemFS }

type memFile struct {
	pebblevfs.File
	name string
}

func (f memFile) Stat() (fs.FileInfo, error) { return f.File.Stat() }
func (f memFile) Name() string               { return f.name }

func (v memVFS) Create(name string) (vfs.File, error) {
	f, err := v.m.Create(name, pebblevfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	return memFile{f, name}, nil
}

func (v memVFS) Open(name string) (vfs.File, error) {
	f, err := v.m.Open(name)
	if err != nil {
		return nil, err
	}
	return memFile{f, name}, nil
}

func (v memVFS) Rename(oldname, newname string) error      { return v.m.Rename(oldname, newname) }
func (v memVFS) Remove(name string) error                  { return v.m.Remove(name) }
func (v memVFS) RemoveAll(p string) error                  { return v.m.RemoveAll(p) }
func (v memVFS) MkdirAll(p string, perm fs.FileMode) error { return v.m.MkdirAll(p, perm) }
func (v memVFS) Stat(name string) (fs.FileInfo, error)     { return v.m.Stat(name) }
func (v memVFS) Usage(string) (vfs.Usage, error) {
	return vfs.Usage{Total: 1 << 40, Free: 1 << 40}, nil
}
func (v memVFS) SyncData(name string) error { return v.sync(name, v.m.Open) }
func (v memVFS) SyncDir(p string) error {
	return v.sync(p, func(n string, _ ...pebblevfs.OpenOption) (pebblevfs.File, error) { return v.m.OpenDir(n) })
}
func (v memVFS) sync(name string, open func(string, ...pebblevfs.OpenOption) (pebblevfs.File, error)) error {
	f, err := open(name)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

func (v memVFS) ReadDir(name string) ([]fs.DirEntry, error) {
	names, err := v.m.List(name)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		fi, err := v.m.Stat(path.Join(name, n))
		if err != nil {
			return nil, err
		}
		out = append(out, fs.FileInfoToDirEntry(fi))
	}
	return out, nil
}

// openMemPool opens a pool of one set of 4 drives (parity 2) on m, as a
// node started after a power loss would.
func openMemPool(t *testing.T, m *pebblevfs.MemFS, id uuid.UUID) (*Pool, func()) {
	t.Helper()
	var ds []Drive
	var locals []*drive.Local
	for i := 0; i < 4; i++ {
		d, err := drive.OpenLocal(fmt.Sprintf("/d%d", i), drive.Options{FS: memVFS{m}, MetaFS: m, ShardFiles: testShardFiles()})
		if err != nil {
			t.Fatal(err)
		}
		ds, locals = append(ds, d), append(locals, d)
	}
	set, err := NewSet(ds, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(id, []*Set{set})
	if err != nil {
		t.Fatal(err)
	}
	return p, func() {
		for _, d := range locals {
			_ = d.Close()
		}
	}
}

// TestPowerLossKeepsAcknowledgedWrites: a power-loss mode of the crash
// harness, in process. Four drives (shard files and metadata stores alike)
// live on one in-memory filesystem; a writer PUTs (inline and shard-file
// objects), overwrites, deletes and completes multipart uploads; at a
// random moment the filesystem is cloned as a power loss leaves it (only
// what was synced, plus a random share of what was not), and a pool opened
// on the clone must read every acknowledged write with its bytes, and the
// write in flight either whole or not at all. The clone goes on as the next
// round's filesystem. STRATA_POWERLOSS_SEED repeats a run,
// STRATA_POWERLOSS_ROUNDS lengthens it.
func TestPowerLossKeepsAcknowledgedWrites(t *testing.T) {
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv("STRATA_POWERLOSS_SEED"), 10, 64); err == nil {
		seed = s
	}
	rounds := 12
	if n, err := strconv.Atoi(os.Getenv("STRATA_POWERLOSS_ROUNDS")); err == nil {
		rounds = n
	}
	t.Logf("seed %d (STRATA_POWERLOSS_SEED), %d rounds", seed, rounds)
	rng := rand.New(rand.NewSource(seed))
	m := pebblevfs.NewCrashableMem()
	// The drives' mount points exist and are durable, as a PVC's are.
	for i := 0; i < 4; i++ {
		if err := m.MkdirAll(fmt.Sprintf("/d%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := (memVFS{m}).SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	pool, closePool := openMemPool(t, m, id)
	if err := pool.MakeBucket(t.Context(), "bk"); err != nil {
		t.Fatal(err)
	}
	const keys = 8
	acked := map[string][]byte{} // nil: no object
	how := map[string]string{}   // the operation that left it so
	ops, violations := 0, 0
	for round := 0; round < rounds; round++ {
		// The writer: one operation at a time, until told to stop.
		var stop atomic.Bool
		var mu sync.Mutex
		var inflightKey string
		var inflight []byte
		inflightSet := false
		wrng := rand.New(rand.NewSource(rng.Int63()))
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !stop.Load() {
				key := "k" + strconv.Itoa(wrng.Intn(keys))
				var data []byte
				kind := wrng.Intn(10)
				switch {
				case kind < 4:
					data = randomBytes(1 + wrng.Intn(4000)) // inline
				case kind < 7:
					data = randomBytes(200<<10 + wrng.Intn(1<<20)) // shard files
				case kind < 9:
					data = nil // delete
				default:
					data = randomBytes(100<<10 + wrng.Intn(200<<10)) // multipart, one part
				}
				mu.Lock()
				inflightKey, inflight, inflightSet = key, data, true
				mu.Unlock()
				var err error
				switch {
				case data == nil:
					_, err = pool.DeleteObject(t.Context(), "bk", key, nil, objlayer.DeleteUnversioned)
				case kind == 9:
					var u objlayer.UploadInfo
					if u, err = pool.NewMultipartUpload(t.Context(), "bk", key, nil); err == nil {
						var p objlayer.PartInfo
						if p, err = pool.PutObjectPart(t.Context(), "bk", key, u.ID, 1, bytes.NewReader(data), int64(len(data)), objlayer.PartOptions{}); err == nil {
							_, err = pool.CompleteMultipartUpload(t.Context(), "bk", key, u.ID, []objlayer.CompletePart{{Number: 1, ETag: p.ETag}}, objlayer.PutOptions{})
						}
					}
				default:
					_, err = pool.PutObject(t.Context(), "bk", key, bytes.NewReader(data), int64(len(data)), objlayer.PutOptions{})
				}
				mu.Lock()
				if err == nil {
					acked[key] = data
					how[key] = [...]string{"inline PUT", "inline PUT", "inline PUT", "inline PUT", "PUT", "PUT", "PUT", "DELETE", "DELETE", "multipart"}[kind]
					ops++
				}
				inflightSet = false
				mu.Unlock()
				if err != nil {
					t.Errorf("round %d: %s %s: %v", round, map[bool]string{true: "DELETE", false: "PUT"}[data == nil], key, err)
					return
				}
			}
		}()
		time.Sleep(time.Duration(5+rng.Intn(60)) * time.Millisecond)
		// Power loss: what was acknowledged by now must survive; the one
		// write under way may land whole or not at all.
		stop.Store(true)
		mu.Lock()
		want := make(map[string][]byte, len(acked))
		for k, v := range acked {
			want[k] = v
		}
		mayKey, may, mayOK := inflightKey, inflight, inflightSet
		mu.Unlock()
		clone := m.CrashClone(pebblevfs.CrashCloneCfg{UnsyncedDataPercent: rng.Intn(60), RNG: randv2.New(randv2.NewPCG(uint64(rng.Int63()), 1))})
		<-done
		closePool()
		m = clone
		pool, closePool = openMemPool(t, m, id)
		for i := 0; i < keys; i++ {
			key := "k" + strconv.Itoa(i)
			var buf bytes.Buffer
			var got []byte
			_, _, err := pool.GetObject(t.Context(), &buf, "bk", key, nil, 0, -1)
			switch {
			case errors.Is(err, objlayer.ErrObjectNotFound):
			case err != nil:
				violations++
				t.Errorf("round %d: %s (last acknowledged: %s) unreadable after the power loss: %v", round, key, how[key], err)
				continue
			default:
				got = buf.Bytes()
			}
			ok := bytes.Equal(got, want[key]) && (got == nil) == (want[key] == nil)
			if !ok && mayOK && key == mayKey {
				ok = bytes.Equal(got, may) && (got == nil) == (may == nil)
			}
			if !ok {
				violations++
				t.Errorf("round %d: %s reads %d bytes (present %v) after the power loss; acknowledged %d (present %v) by %s",
					round, key, len(got), got != nil, len(want[key]), want[key] != nil, how[key])
				continue
			}
			acked[key] = got // what the next round starts from
		}
		if t.Failed() {
			break
		}
	}
	closePool()
	t.Logf("%d rounds, %d operations acknowledged, %d power losses, %d violations", rounds, ops, rounds, violations)
}
