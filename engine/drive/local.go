package drive

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/vfs"
)

// Errors of a drive.
var (
	ErrBucketNotFound  = errors.New("bucket not found")
	ErrBucketExists    = errors.New("bucket already exists")
	ErrBucketNotEmpty  = errors.New("bucket not empty")
	ErrVersionNotFound = errors.New("version not found")
)

// BucketInfo is a bucket as one drive stores it.
type BucketInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Versioning is "", "Enabled" or "Suspended".
	Versioning string `json:"versioning,omitempty"`
	// Tags are the bucket's tags.
	Tags map[string]string `json:"tags,omitempty"`
	// Owner is the access key that created the bucket ("" for buckets made
	// before owners were kept: the root account's).
	Owner string `json:"owner,omitempty"`
	// ACL, Policy, CORS and ObjectLock are the S3 front end's documents
	// for the bucket (its ACL, bucket policy, CORS and object-lock
	// configuration), kept as it gave them; empty when not set.
	ACL        []byte `json:"acl,omitempty"`
	Policy     []byte `json:"policy,omitempty"`
	CORS       []byte `json:"cors,omitempty"`
	ObjectLock []byte `json:"objectLock,omitempty"`
	// Encryption is the bucket's default encryption (JSON: mode and key
	// ID), applied to writes that ask for none.
	Encryption []byte `json:"encryption,omitempty"`
	// Ownership is the bucket's object-ownership control (S3's
	// BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter).
	Ownership string `json:"ownership,omitempty"`
	// Lifecycle is the bucket's lifecycle configuration (S3's XML document,
	// as engine/lifecycle checked it); empty when not set.
	Lifecycle []byte `json:"lifecycle,omitempty"`
	// Notification is the bucket's notification configuration (the S3
	// front end's XML document).
	Notification []byte `json:"notification,omitempty"`
	// Replication is the bucket's replication configuration (the S3
	// front end's XML document).
	Replication []byte `json:"replication,omitempty"`
	// PublicAccessBlock is the bucket's public access block (the S3 front
	// end's JSON); empty when not set.
	PublicAccessBlock []byte `json:"publicAccessBlock,omitempty"`
	// Quota is the bucket's hard quota; nil for none.
	Quota *objlayer.Quota `json:"quota,omitempty"`
	// Updated is the time of the last change to the record; when drives
	// disagree, the latest change wins.
	Updated time.Time `json:"updated,omitzero"`
}

// Options configure a local drive.
type Options struct {
	// FS is the filesystem seam; vfs.Default when nil.
	FS vfs.FS
	// NoSync turns off fsync of data and metadata (relaxed mode, for
	// benchmarks that say so). The default is durable.
	NoSync bool
	// CacheSize is the metadata store's block cache (beyond what pebble
	// reserves in it for memtables); 0 = DefaultCacheSize.
	CacheSize int64
	// Cache, when set, is one block cache every drive opened with it
	// shares, memtables included: the node's metadata memory is then its
	// size, whatever the number of drives (CacheSize is not used).
	Cache *MetaCache
	// MemTableSize is each of the store's memtables (pebble keeps the one
	// being written and up to two being flushed); 0 = DefaultMemTableSize.
	MemTableSize int64
	// MetaFS is the metadata store's filesystem seam (pebble's own
	// interface, so tests can inject faults with its errorfs); the
	// operating system's when nil.
	MetaFS pebblevfs.FS
	// Log receives the metadata store's messages; slog.Default() when nil.
	Log *slog.Logger
	// ShardFiles stages and commits each shard as a file of its own,
	// data/<xx>/<dataDir>.<part>, instead of in a directory per version
	// (data/<xx>/<dataDir>/part.<part>): no directory to make, sync and
	// remove for each shard. Both forms are read whatever it says.
	// `strata server` sets it unless --shard-files=false (docs/engine.md,
	// On-disk format).
	ShardFiles bool
}

// Local is a drive that is a directory on this node.
type Local struct {
	root string
	fs   vfs.FS
	meta *store
	// usage are the buckets' usage figures (usage.go).
	usage  usageFigures
	noSync bool
	// shardFiles: Options.ShardFiles.
	shardFiles bool

	// locks serialise read-modify-write of one object's records on this
	// drive (replacing the null version). They are local to the drive: no
	// lock is ever held across drives or nodes.
	locks [64]sync.Mutex

	mu     sync.RWMutex
	format *Format

	closeOnce sync.Once
	log       *slog.Logger

	// stopSweep ends the sweeper of replaced versions, which closes swept
	// as it returns (undo.go).
	stopSweep, swept chan struct{}

	// StoreRecreated is set when the metadata store was found corrupt at
	// open and replaced by an empty one: the drive must be rebuilt.
	StoreRecreated bool
}

// Paths under the drive root.
const (
	metaDir        = ".strata"
	formatFileName = "format.json"
)

// OpenLocal opens (creating if needed) the drive at root. A drive without a
// format file opens; Format then reports ErrUnformatted.
func OpenLocal(root string, opts Options) (*Local, error) {
	fsys := opts.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	d := &Local{root: root, fs: fsys, noSync: opts.NoSync, shardFiles: opts.ShardFiles}
	for _, dir := range []string{d.path("tmp"), d.path("data")} {
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("drive %s: %w", root, err)
		}
	}
	// The 256 fan-out directories of data/ are made here, so a commit never
	// makes one: two commits racing to make the same one could otherwise
	// leave the second's shard under an entry not yet durable.
	fanouts, err := d.makeFanouts()
	if err != nil {
		return nil, fmt.Errorf("drive %s: %w", root, err)
	}
	// Leftovers of writes that never committed (a crash mid-PUT).
	if err := d.clearTmp(); err != nil {
		return nil, fmt.Errorf("drive %s: clearing tmp: %w", root, err)
	}
	if opts.MetaFS == nil {
		opts.MetaFS = pebblevfs.Default
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	opts.Log = opts.Log.With("drive", root)
	d.log = opts.Log
	meta, err := openStore(d.path("meta"), opts)
	if pebble.IsCorruptionError(err) {
		// The store cannot be trusted: set it aside (for post-mortems) and
		// start an empty one. The drive keeps its slot and is rebuilt by
		// healing, like a replaced drive.
		aside := d.path(fmt.Sprintf("meta.corrupt-%d", time.Now().Unix()))
		if rerr := opts.MetaFS.Rename(d.path("meta"), aside); rerr != nil {
			return nil, fmt.Errorf("drive %s: metadata store corrupt and cannot be set aside: %w", root, errors.Join(err, rerr))
		}
		opts.Log.Warn("metadata store corrupt: set aside, starting empty", "err", err, "aside", aside)
		d.StoreRecreated = true
		meta, err = openStore(d.path("meta"), opts)
	}
	if err != nil {
		return nil, fmt.Errorf("drive %s: opening metadata store: %w", root, err)
	}
	d.meta = meta
	// The directories made above (and the store's, which pebble syncs the
	// inside of but not its entry) are durable before anything is written
	// into them: a power loss would otherwise take a new drive's tree, and
	// every write acknowledged in it, away.
	synced := []string{d.path(), d.root}
	if fanouts {
		synced = append(synced, d.path("data"))
	}
	if err := d.syncAll(nil, synced); err != nil {
		_ = meta.Close()
		return nil, fmt.Errorf("drive %s: syncing its directories: %w", root, err)
	}
	data, err := vfs.ReadFile(fsys, d.path(formatFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		_ = meta.Close()
		return nil, fmt.Errorf("drive %s: reading format: %w", root, err)
	default:
		f, err := DecodeFormat(data)
		if err != nil {
			_ = meta.Close()
			return nil, fmt.Errorf("drive %s: %w", root, err)
		}
		d.format = &f
	}
	if err := errors.Join(d.countUsage(), d.loadUsage()); err != nil {
		_ = meta.Close()
		return nil, err
	}
	// Versions replaced before a restart whose window has passed, then
	// every sweepEvery.
	if err := d.sweepUndo(time.Now()); err != nil {
		opts.Log.Warn("sweeping replaced versions", "err", err)
	}
	d.stopSweep, d.swept = make(chan struct{}), make(chan struct{})
	go d.sweeper(d.stopSweep)
	return d, nil
}

// Metadata store sizing. The store holds version records (and the shards of
// small objects): a block cache keeps hot records in memory, bloom filters
// let a lookup of an absent key (every new object's PUT) skip tables, and
// blocks are not compressed since object data rarely compresses and the CPU
// is better spent serving requests.
//
// Data blocks are 32 KiB, not pebble's 4 KiB: the record of a small object
// carries its inline shard (about 2.3 KB for a 4 KiB object at 2+2), so a
// 4 KiB block held one record or two and a listing paid a block read
// (cache lookup, pread, checksum) for each; a 32 KiB block holds about 14.
// That cut a listing's server CPU by 14% (docs/benchmarks.md). The block size is a table's own: tables written
// before keep theirs until compacted, and every release reads both.
const (
	DefaultCacheSize    = 16 << 20
	DefaultMemTableSize = 4 << 20
	dataBlockSize       = 32 << 10
	// memTableReserve is what pebble takes out of the block cache for its
	// memtables: it reserves each memtable's size in the cache it is
	// given (a mutable one and one being flushed, at most, before writes
	// stall). A cache of 32 MiB, as it was, was all reserved once two
	// 16 MiB memtables existed, so it kept no block at all: every record
	// read and every listing went to pread, checksum and allocation
	// (TestBlockCacheKeepsBlocks). The cache is now DefaultCacheSize plus
	// this, 24 MiB a drive: at least 16 MiB of blocks while the memtables
	// are full, up to 24 MiB while they are not. Memtables are 4 MiB (16,
	// then 8 before): the blocks and the memtables live on the Go heap
	// (static builds, no cgo), where a larger cache cost about 1.7 times
	// its size in resident memory, and 4 MiB ones took 4 KiB PUTs from
	// 3,292-3,486 to 3,540-3,811 a second, at 5% less server CPU each, and
	// the suite's peak RSS from 361-366 to 280-313 MiB (docs/benchmarks.md).
	// A server given a memory limit sizes both from it instead
	// (memlimit.PlanFor: one cache for all its drives).
	memTableReserve = 2 * DefaultMemTableSize
)

// MetaCache is a metadata block cache shared by a node's drives. It is
// held for the life of the process: a drive opened later (a pool added, a
// drive coming back) joins it.
type MetaCache struct{ c *pebble.Cache }

// NewMetaCache returns a shared cache of size bytes.
func NewMetaCache(size int64) *MetaCache { return &MetaCache{c: pebble.NewCache(size)} }

// openStore opens the metadata store at dir.
func openStore(dir string, o Options) (*store, error) {
	var c *pebble.Cache
	if o.Cache != nil {
		c = o.Cache.c // pebble.Open takes a reference of its own
	} else {
		size := o.CacheSize
		if size <= 0 {
			size = DefaultCacheSize
		}
		c = pebble.NewCache(size + memTableReserve)
		defer c.Unref() // the open store holds its own reference
	}
	memTable := o.MemTableSize
	if memTable <= 0 {
		memTable = DefaultMemTableSize
	}
	opts := storeOptions(c, memTable)
	opts.FS = o.MetaFS
	s := newStore(o.Log)
	opts.Logger = storeLogger{log: o.Log, store: s}
	opts.EventListener = &pebble.EventListener{BackgroundError: s.backgroundError,
		WriteStallBegin: s.writeStallBegin, WriteStallEnd: s.writeStallEnd}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	s.db = db
	return s, nil
}

// Compaction is shaped for what a drive's store holds: records of about
// 2 KiB (a small object's inline shard) under keys that arrive in no
// order, so every memtable flush overlaps the whole key range and each
// compaction out of L0 rewrites all of the level below it. Pebble's
// defaults (compact L0 at 4 sublevels of 2 MiB files) made a million-object
// ingest write 8.6 bytes of compactions for each byte applied; letting L0
// gather 16 sublevels of 8 MiB files before it is compacted makes each of
// those compactions carry four times the new data for the same rewrite:
// 5.0 bytes, and 29% less of the store's CPU (docs/benchmarks.md). Point
// reads pay one bloom filter probe per L0 file they pass, and writes stall
// only at 32 sublevels. A larger base level made it worse (12.5), a smaller
// one too (6.9). None of this is part of the drive's format.
const (
	l0CompactionThreshold = 16
	l0StopWrites          = 32
	l0TargetFileSize      = 8 << 20
)

func storeOptions(c *pebble.Cache, memTable int64) *pebble.Options {
	opts := &pebble.Options{Cache: c, MemTableSize: uint64(memTable), Merger: usageMerger,
		L0CompactionThreshold: l0CompactionThreshold, L0StopWritesThreshold: l0StopWrites}
	opts.TargetFileSizes[0] = l0TargetFileSize
	for i := range opts.Levels {
		opts.Levels[i].BlockSize = dataBlockSize
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	return opts
}

// FormatPath is where the format file of the drive at root lives.
func FormatPath(root string) string { return filepath.Join(root, metaDir, formatFileName) }

func (d *Local) path(parts ...string) string {
	return filepath.Join(append([]string{d.root, metaDir}, parts...)...)
}

// Root is the drive's directory.
func (d *Local) Root() string { return d.root }

// Close closes the metadata store. Closing twice is harmless (pebble
// itself panics on a second Close).
func (d *Local) Close() error {
	var err error
	d.closeOnce.Do(func() {
		close(d.stopSweep)
		<-d.swept
		err = d.meta.Close()
	})
	return err
}

// Failed is ErrStoreFailed, with its reason, once the drive's metadata
// store failed fatally; nil while it works.
func (d *Local) Failed() error { return d.meta.err() }

// Changes counts the writes to the drive's metadata store (objects,
// versions, buckets, uploads), each counted once it is applied. Whoever
// read the same count before and after reading a listing from the drive
// knows nothing was written meanwhile.
func (d *Local) Changes() uint64 { return d.meta.writes.Load() }

// Online implements erasure.Liveness: a drive whose metadata store failed,
// or that was closed, is offline.
func (d *Local) Online() bool { return d.Failed() == nil && !d.meta.closed.Load() }

// Format returns the drive's identity, or ErrUnformatted.
func (d *Local) Format(ctx context.Context) (Format, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.format == nil {
		return Format{}, ErrUnformatted
	}
	return *d.format, nil
}

// WriteFormat formats the drive (atomically; durable before it returns).
func (d *Local) WriteFormat(f Format) error {
	data, err := EncodeFormat(f)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(d.fs, d.path(formatFileName), data); err != nil {
		return fmt.Errorf("drive %s: writing format: %w", d.root, err)
	}
	d.mu.Lock()
	d.format = &f
	d.mu.Unlock()
	return nil
}

func (d *Local) writeOpts() *pebble.WriteOptions {
	if d.noSync {
		return pebble.NoSync
	}
	return pebble.Sync
}

// MakeBucket records a bucket.
func (d *Local) MakeBucket(ctx context.Context, b BucketInfo) error {
	k := bucketKey(b.Name)
	lock := d.lockFor(b.Name, "")
	lock.Lock()
	defer lock.Unlock()
	if _, closer, err := d.meta.Get(k); err == nil {
		_ = closer.Close()
		return ErrBucketExists
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	return d.putBucket(b)
}

// SetBucket writes a bucket record whether or not it exists (versioning
// changes, healing).
func (d *Local) SetBucket(ctx context.Context, b BucketInfo) error { return d.putBucket(b) }

func (d *Local) putBucket(b BucketInfo) error {
	v, err := json.Marshal(b)
	if err != nil {
		return err
	}
	return d.meta.Set(bucketKey(b.Name), v, d.writeOpts())
}

// StatBucket returns a bucket's record.
func (d *Local) StatBucket(ctx context.Context, name string) (BucketInfo, error) {
	if err := ended(ctx); err != nil {
		return BucketInfo{}, err
	}
	v, closer, err := d.meta.Get(bucketKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return BucketInfo{}, ErrBucketNotFound
	}
	if err != nil {
		return BucketInfo{}, err
	}
	defer closer.Close()
	var b BucketInfo
	if err := json.Unmarshal(v, &b); err != nil {
		return BucketInfo{}, fmt.Errorf("drive %s: bucket %s: %w", d.root, name, err)
	}
	return b, nil
}

// ListBuckets returns every bucket in name order.
func (d *Local) ListBuckets(ctx context.Context) ([]BucketInfo, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: bucketPrefix, UpperBound: prefixEnd(bucketPrefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []BucketInfo
	for it.First(); it.Valid(); it.Next() {
		var b BucketInfo
		if err := json.Unmarshal(it.Value(), &b); err != nil {
			return nil, fmt.Errorf("drive %s: bucket record: %w", d.root, err)
		}
		out = append(out, b)
	}
	return out, d.meta.after(it.Error())
}

// DeleteBucket removes an empty bucket (force removes its records too).
func (d *Local) DeleteBucket(ctx context.Context, name string, force bool) error {
	if _, err := d.StatBucket(ctx, name); err != nil {
		return err
	}
	p := bucketObjectsPrefix(name)
	if !force {
		it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return err
		}
		nonEmpty := it.First()
		if err := d.meta.after(it.Close()); err != nil {
			return err
		}
		if nonEmpty {
			return ErrBucketNotEmpty
		}
	}
	b := d.meta.NewBatch()
	defer b.Close()
	for _, p := range [][]byte{p, bucketVersionsPrefix(name)} {
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return err
		}
	}
	if err := b.Delete(bucketKey(name), nil); err != nil {
		return err
	}
	if err := b.Delete(usageKey(name), nil); err != nil {
		return err
	}
	if err := d.meta.Commit(b, d.writeOpts()); err != nil {
		return err
	}
	d.usage.drop(name)
	return nil
}

func (d *Local) lockFor(bucket, object string) *sync.Mutex {
	h := xxhash.Sum64String(bucket + "/" + object)
	return &d.locks[h%uint64(len(d.locks))]
}

// Shard files. A write stages its shard under tmp/<dataDir>/, then
// PutVersion moves the directory to data/<xx>/<dataDir>/ and syncs the
// files, the directory and its parent (together) before the record is
// committed. With Options.ShardFiles a write stages tmp/<dataDir>.<part>
// and syncs it as it closes it; PutVersion moves it to
// data/<xx>/<dataDir>.<part> and syncs data/<xx>.

func hexID(id [16]byte) string { return hex.EncodeToString(id[:]) }

func (d *Local) stagedPath(dataDir [16]byte) string { return d.path("tmp", hexID(dataDir)) }

func (d *Local) dataDirPath(dataDir [16]byte) string {
	h := hexID(dataDir)
	return d.path("data", h[:2], h)
}

func partName(part int) string { return "part." + strconv.Itoa(part) }

// shardFile is where part's shard of dataDir lives as a file of its own
// (Options.ShardFiles).
func (d *Local) shardFile(dataDir [16]byte, part int) string {
	h := hexID(dataDir)
	return d.path("data", h[:2], h+"."+strconv.Itoa(part))
}

// stagedFile is where part's shard of the write id is staged as a file of
// its own (Options.ShardFiles).
func (d *Local) stagedFile(id [16]byte, part int) string {
	return d.path("tmp", hexID(id)+"."+strconv.Itoa(part))
}

// stagedShard is where part's shard of the write id is staged.
func (d *Local) stagedShard(id [16]byte, part int) string {
	if d.shardFiles {
		return d.stagedFile(id, part)
	}
	return filepath.Join(d.stagedPath(id), partName(part))
}

// CreateStaged creates the shard file of one part in the staging area.
func (d *Local) CreateStaged(ctx context.Context, dataDir [16]byte, part int) (vfs.File, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	if d.shardFiles {
		return d.createStagedFile(dataDir, part)
	}
	dir := d.stagedPath(dataDir)
	if err := d.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := filepath.Join(dir, partName(part))
	if d.noSync {
		return d.fs.Create(name) // the page cache is the point of relaxed mode
	}
	return vfs.CreateDirect(d.fs, name)
}

// AbortStaged removes a staged data directory.
func (d *Local) AbortStaged(ctx context.Context, dataDir [16]byte) error {
	if d.shardFiles {
		return d.removeParts(func(part int) string { return d.stagedFile(dataDir, part) })
	}
	return d.fs.RemoveAll(d.stagedPath(dataDir))
}

// createStagedFile stages part's shard as a file of its own, synced as it
// is closed: each drive's writer syncs its shard in its own lane as it
// finishes, and the commit has only an entry to sync.
func (d *Local) createStagedFile(id [16]byte, part int) (vfs.File, error) {
	name := d.stagedFile(id, part)
	if d.noSync {
		return d.fs.Create(name)
	}
	f, err := vfs.CreateDirect(d.fs, name)
	if err != nil {
		return nil, err
	}
	return syncedOnClose{f}, nil
}

// syncedOnClose is a staged shard file that syncs its data as it closes.
type syncedOnClose struct{ vfs.File }

func (f syncedOnClose) Close() error {
	err := f.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

// GathersWrites passes on the file's own (vfs.WriteGatherer).
func (f syncedOnClose) GathersWrites() bool { return vfs.GathersWrites(f.File) }

// removeParts removes the files name(1), name(2)... up to the first that
// is not there (parts are staged and committed in order from the first).
func (d *Local) removeParts(name func(part int) string) error {
	for part := 1; ; part++ {
		err := d.fs.Remove(name(part))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// shardParts is how many shard files a version has: one a part.
func shardParts(rec *Record) int { return max(1, len(rec.Parts)) }

// commitStagedFiles moves the shards staged as files of their own under
// stageID into place as rec's (Options.ShardFiles). Each rename replaces
// atomically what is there (a heal meeting the write it repairs, or a heal
// cut off before), so a reader never finds a shard missing.
func (d *Local) commitStagedFiles(stageID [16]byte, rec *Record) error {
	files := make([]string, shardParts(rec))
	for i := range files {
		files[i] = d.shardFile(rec.DataDir, i+1)
	}
	parent := filepath.Dir(files[0])
	made, err := d.mkdirs(parent)
	if err != nil {
		return err
	}
	for i, final := range files {
		if err := d.fs.Rename(d.stagedFile(stageID, i+1), final); err != nil {
			// The parts moved go back to tmp, for the writer's abort (or the
			// next open) to remove with the rest: a part no record names is
			// never left in data/.
			for j := i - 1; j >= 0; j-- {
				if d.fs.Rename(files[j], d.stagedFile(stageID, j+1)) != nil {
					_ = d.fs.Remove(files[j])
				}
			}
			return fmt.Errorf("drive %s: moving shard into place: %w", d.root, err)
		}
	}
	// The files' data is durable (synced as they were closed); their
	// entries in data/<xx>, and a new data/<xx>'s in data/, must be too
	// before the record commits.
	return d.syncAll(nil, append([]string{parent}, made...))
}

func (d *Local) commitStaged(stageID [16]byte, rec *Record) error {
	if d.shardFiles {
		return d.commitStagedFiles(stageID, rec)
	}
	final := d.dataDirPath(rec.DataDir)
	parent := filepath.Dir(final)
	staged := d.stagedPath(stageID)
	made, err := d.mkdirs(parent)
	if err != nil {
		return err
	}
	dirs := append([]string{final, parent}, made...)
	entries, err := d.fs.ReadDir(staged)
	if err != nil {
		return err
	}
	var files []string
	if _, err := d.fs.Stat(final); err == nil {
		// The data directory is there already (a heal meeting the write it
		// repairs, or a heal cut off before): its files are replaced one
		// by one, each rename atomic, so a reader never finds it missing.
		for _, e := range entries {
			if err := d.fs.Rename(filepath.Join(staged, e.Name()), filepath.Join(final, e.Name())); err != nil {
				return fmt.Errorf("drive %s: moving shard into place: %w", d.root, err)
			}
		}
		_ = d.fs.RemoveAll(staged)
	} else if err := d.fs.Rename(staged, final); err != nil {
		return fmt.Errorf("drive %s: moving shard into place: %w", d.root, err)
	}
	for _, e := range entries {
		files = append(files, filepath.Join(final, e.Name()))
	}
	// Before the record commits, the shard files' data, the directory's
	// entries and its own entry in the parent (and a new parent's in
	// data/) must be durable. The syncs
	// run together, so a PUT waits for one sync latency, not three. The
	// old name's removal from tmp needs no sync of its own: a rename is one
	// journal transaction, and a leftover in tmp is cleared at the next
	// open.
	return d.syncAll(files, dirs)
}

// makeFanouts makes the fan-out directories data/00..ff that are missing,
// and reports whether it made any (data/ then needs a sync).
func (d *Local) makeFanouts() (bool, error) {
	made := false
	for i := range 256 {
		dir := d.path("data", fmt.Sprintf("%02x", i))
		if d.exists(dir) {
			continue
		}
		if err := d.fs.MkdirAll(dir, 0o755); err != nil {
			return false, err
		}
		made = true
	}
	return made, nil
}

// mkdirs makes dir and any missing parents, and returns the directories
// whose entries that changed (each made directory's parent), for the
// caller to sync with what it writes there: a new fan-out directory's
// entry in data/ is as necessary to an object as its own files.
func (d *Local) mkdirs(dir string) ([]string, error) {
	var changed []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := d.fs.Stat(p); err == nil || p == d.root || filepath.Dir(p) == p {
			break
		}
		changed = append(changed, filepath.Dir(p))
	}
	if len(changed) == 0 {
		return nil, nil
	}
	return changed, d.fs.MkdirAll(dir, 0o755)
}

// syncAll makes files' data and directories' entries durable, all at once
// (nothing in relaxed mode).
func (d *Local) syncAll(files, dirs []string) error {
	if d.noSync {
		return nil
	}
	errc := make(chan error, len(files)+len(dirs))
	for _, f := range files {
		go func() { errc <- d.fs.SyncData(f) }()
	}
	for _, dir := range dirs {
		go func() { errc <- d.fs.SyncDir(dir) }()
	}
	var errs []error
	for range len(files) + len(dirs) {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

// DiskInfo reports the drive filesystem's capacity.
func (d *Local) DiskInfo(ctx context.Context) (vfs.Usage, error) { return d.fs.Usage(d.root) }

// OpenShard opens the committed shard file of one part.
func (d *Local) OpenShard(ctx context.Context, dataDir [16]byte, part int) (vfs.File, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	// The form this drive writes first, then the other.
	names := [2]string{filepath.Join(d.dataDirPath(dataDir), partName(part)), d.shardFile(dataDir, part)}
	if d.shardFiles {
		names[0], names[1] = names[1], names[0]
	}
	f, err := d.fs.Open(names[0])
	if errors.Is(err, fs.ErrNotExist) {
		if ff, ferr := d.fs.Open(names[1]); ferr == nil {
			return ff, nil
		}
	}
	return f, err
}

// hasShards reports whether the shards of dataDir can be found, in either
// form.
func (d *Local) hasShards(dataDir [16]byte) bool {
	return d.exists(d.dataDirPath(dataDir)) || d.exists(d.shardFile(dataDir, 1))
}

// removeShards removes the shard files of rec, in either form.
func (d *Local) removeShards(rec *Record) {
	_ = d.fs.RemoveAll(d.dataDirPath(rec.DataDir))
	d.removeShardFiles(rec.DataDir, shardParts(rec))
}

// removeShardFiles removes parts 1..parts of dataDir kept as files of their
// own, each that is there.
func (d *Local) removeShardFiles(dataDir [16]byte, parts int) {
	for part := 1; part <= parts; part++ {
		_ = d.fs.Remove(d.shardFile(dataDir, part))
	}
}

func (d *Local) clearTmp() error {
	entries, err := d.fs.ReadDir(d.path("tmp"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := d.fs.RemoveAll(d.path("tmp", e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// walkCheck is how many entries a walk reads between checks of its context.
const walkCheck = 256

// ended is the reason ctx ended, or nil while it lives: reads and walks stop
// when the request they serve is gone. Commits do not look: once the
// erasure layer starts one, it runs to the end on every drive.
func ended(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}
