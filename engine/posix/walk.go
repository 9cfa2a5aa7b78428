package posix

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Listings walk a bucket's tree in S3 key order: each directory's entries
// sorted with a directory compared as "name/" (so "a-b" and "a.txt" come
// before the keys under "a/"), directories entered where they sort. A
// walk starts past a marker by seeking in each directory on the way to it
// instead of visiting what comes before.
//
// A page of a listing reads every directory on the path to its marker
// again, and readdir hands entries unsorted: paging through a directory
// of n entries would read and sort all n for each page, O(n^2) over the
// listing (versitygw's cost). So sorted listings of large directories are
// cached, and used again while the directory has not changed since: its
// modification and change times are the same (fstat of the directory
// just opened, which on NFS revalidates it, as its readdir would). A
// directory changed in the last moments is not cached: file times are
// coarse, and a change in the same tick as the read would not show.

// dirEntry is a directory entry as a walk sees it.
type dirEntry struct {
	name string
	// dir: a directory (entered; sorts as name+"/"). A symbolic link is
	// never entered: it is a leaf, whatever it points to.
	dir  bool
	link bool
	// regular: a plain file.
	regular bool
}

func (e dirEntry) sortKey() string {
	if e.dir {
		return e.name + "/"
	}
	return e.name
}

// walkAction is what a visit tells the walk.
type walkAction int

const (
	walkOn   walkAction = iota // go on (into a directory)
	walkSkip                   // do not enter this directory
	walkStop                   // end the walk
)

// walk visits the entries of the tree below bucketDir/relDir (relDir ""
// or ending in '/') whose keys, or keys below them, sort after after, in
// key order: fn gets each file's key and each directory's key ("name/")
// before its entries. The staging directory and names that are not UTF-8
// (no S3 client can name them) are left out.
func (l *Layer) walk(ctx context.Context, bucketDir, relDir, after string, fn func(key string, e dirEntry) walkAction) (bool, error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	ents, err := l.lists.read(filepath.Join(bucketDir, relDir))
	if notFound(err) {
		return false, nil // removed meanwhile
	}
	if err != nil {
		return true, err
	}
	i := sort.Search(len(ents), func(i int) bool { return endsAfter(relDir, ents[i], after) })
	for ; i < len(ents); i++ {
		e := ents[i]
		if e.name == stagingDir || !utf8.ValidString(e.name) {
			continue
		}
		key := relDir + e.sortKey()
		switch act := fn(key, e); {
		case act == walkStop:
			return true, nil
		case act == walkSkip || !e.dir:
			continue
		}
		if stop, err := l.walk(ctx, bucketDir, key, after, fn); stop || err != nil {
			return true, err
		}
	}
	return false, nil
}

// endsAfter reports whether an entry of relDir holds keys after after:
// itself, or (a directory) keys below it. It is false, then true, over a
// directory's sorted entries, which lets the walk seek.
func endsAfter(relDir string, e dirEntry, after string) bool {
	key := relDir + e.sortKey()
	return key > after || e.dir && within(after, key)
}

// within reports whether a cursor falls among the keys below a directory
// (dirKey ends in '/'): a cursor past every key below it (dirKey and
// pastPrefix, the cursor after a common prefix) does not, so the
// directory is not read.
func within(cursor, dirKey string) bool {
	return strings.HasPrefix(cursor, dirKey) && !strings.HasPrefix(cursor[len(dirKey):], pastPrefix)
}

// dirCache keeps the sorted listings of large directories.
type dirCache struct {
	// settle: a directory changed more recently is not cached
	// (cacheSettle; tests shorten it).
	settle time.Duration
	mu     sync.Mutex
	dirs   map[string]*cachedDir
	total  int
	clock  uint64
	hits   int // listings served from the cache (tests)
}

type cachedDir struct {
	dev, ino     uint64
	mtime, ctime unix.Timespec
	entries      []dirEntry
	used         uint64
}

const (
	// cacheMinEntries: smaller directories are cheap to read again.
	cacheMinEntries = 1000
	// cacheMaxEntries bounds the entries kept, over all directories
	// (about 50 bytes each); a larger directory is read for every page.
	cacheMaxEntries = 1 << 20
	// cacheSettle: a directory changed more recently is not cached.
	cacheSettle = 2 * time.Second
)

func newDirCache() *dirCache { return &dirCache{settle: cacheSettle, dirs: map[string]*cachedDir{}} }

// read returns a directory's entries in walk order.
func (c *dirCache) read(dir string) ([]dirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, unix.ENOTDIR
	}
	if ents := c.get(dir, &st); ents != nil {
		return ents, nil
	}
	des, err := f.ReadDir(-1)
	if err != nil && len(des) == 0 {
		return nil, err
	}
	ents := make([]dirEntry, 0, len(des))
	for _, d := range des {
		t := d.Type()
		ents = append(ents, dirEntry{name: d.Name(), dir: t.IsDir(), link: t&os.ModeSymlink != 0, regular: t.IsRegular()})
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].sortKey() < ents[j].sortKey() })
	c.put(dir, &st, ents)
	return ents, nil
}

func (c *dirCache) get(dir string, st *unix.Stat_t) []dirEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dirs[dir]
	if !ok {
		return nil
	}
	if d.dev != st.Dev || d.ino != st.Ino || d.mtime != st.Mtim || d.ctime != st.Ctim {
		c.total -= len(d.entries)
		delete(c.dirs, dir)
		return nil
	}
	c.clock++
	d.used = c.clock
	c.hits++
	return d.entries
}

func (c *dirCache) put(dir string, st *unix.Stat_t, ents []dirEntry) {
	settled := time.Now().Add(-c.settle).UnixNano()
	if len(ents) < cacheMinEntries || len(ents) > cacheMaxEntries ||
		unix.TimespecToNsec(st.Mtim) > settled || unix.TimespecToNsec(st.Ctim) > settled {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.dirs[dir]; ok {
		c.total -= len(old.entries)
	}
	for c.total+len(ents) > cacheMaxEntries {
		c.evict()
	}
	c.clock++
	c.dirs[dir] = &cachedDir{dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim, entries: ents, used: c.clock}
	c.total += len(ents)
}

// evict drops the least recently used directory.
func (c *dirCache) evict() {
	var oldest string
	var at uint64
	for d, e := range c.dirs {
		if oldest == "" || e.used < at {
			oldest, at = d, e.used
		}
	}
	if oldest == "" {
		c.total = 0
		return
	}
	c.total -= len(c.dirs[oldest].entries)
	delete(c.dirs, oldest)
}
