package posix

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// dirWatch finds directories with more entries than a threshold. Most
// filesystems slow down on lookups and creates in huge directories, and a
// listing reads a whole directory, so a flat namespace of millions of
// keys in one prefix is where a POSIX gateway falls over (docs/gateway.md
// has the measurements). Two sources:
//
//   - writes through the layer: the directory of a written key is counted
//     (in the background, at most once per recount interval per
//     directory, and once more an interval after the last write);
//   - a slow periodic scan of the whole volume, which also sees
//     directories grown through POSIX.
//
// Directories past the threshold are logged once, told to the observer,
// and kept for LargeDirs (the gateway's metrics).
type dirWatch struct {
	root      string
	threshold int
	recount   time.Duration
	observe   func(dir string, entries int, large bool)
	log       *slog.Logger

	mu      sync.Mutex
	counted map[string]*counted // directory -> write-path bookkeeping
	large   map[string]int      // directory -> entries, for those past the threshold
	queue   chan string
}

// counted is when a directory written through the layer was last
// counted, and whether writes came after (it is counted again one
// interval later, so the last burst of writes into a directory is never
// missed).
type counted struct {
	at    time.Time
	dirty bool
}

// maxCounted bounds the write-path bookkeeping; past it, the oldest half
// is forgotten.
const maxCounted = 100_000

func newDirWatch(root string, threshold int, recount time.Duration, observe func(string, int, bool), log *slog.Logger) *dirWatch {
	return &dirWatch{root: root, threshold: threshold, recount: recount, observe: observe, log: log,
		counted: map[string]*counted{}, large: map[string]int{}, queue: make(chan string, 1024)}
}

// LargeDir is a directory past the large-directory threshold.
type LargeDir struct {
	// Dir is bucket/prefix, relative to the root.
	Dir     string
	Entries int
}

// LargeDirs lists the directories past Options.LargeDirThreshold as last
// counted, the largest first.
func (l *Layer) LargeDirs() []LargeDir {
	w := l.dirs
	w.mu.Lock()
	out := make([]LargeDir, 0, len(w.large))
	for d, n := range w.large {
		out = append(out, LargeDir{Dir: d, Entries: n})
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b LargeDir) int {
		if a.Entries != b.Entries {
			return b.Entries - a.Entries
		}
		return strings.Compare(a.Dir, b.Dir)
	})
	return out
}

// LargeDirThreshold is the entry count from which a directory is large
// (Options.LargeDirThreshold; 0: not watched).
func (l *Layer) LargeDirThreshold() int { return l.dirs.threshold }

// wrote notes a write into dir (relative to the root).
func (w *dirWatch) wrote(dir string) {
	if w == nil || w.threshold <= 0 {
		return
	}
	now := time.Now()
	w.mu.Lock()
	c, ok := w.counted[dir]
	if ok && now.Sub(c.at) < w.recount {
		c.dirty = true
		w.mu.Unlock()
		return
	}
	if !ok {
		if len(w.counted) >= maxCounted {
			w.forgetOldest()
		}
		c = &counted{}
		w.counted[dir] = c
	}
	c.at, c.dirty = now, false
	w.mu.Unlock()
	w.enqueue(dir)
}

func (w *dirWatch) enqueue(dir string) {
	select {
	case w.queue <- dir:
	default: // busy: the next write or the scan counts it
	}
}

// recountDirty queues the directories written since they were last
// counted, once the recount interval has passed.
func (w *dirWatch) recountDirty() {
	now := time.Now()
	var due []string
	w.mu.Lock()
	for d, c := range w.counted {
		if c.dirty && now.Sub(c.at) >= w.recount {
			c.at, c.dirty = now, false
			due = append(due, d)
		}
	}
	w.mu.Unlock()
	for _, d := range due {
		w.enqueue(d)
	}
}

func (w *dirWatch) forgetOldest() {
	times := make([]time.Time, 0, len(w.counted))
	for _, c := range w.counted {
		times = append(times, c.at)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	cut := times[len(times)/2]
	for d, c := range w.counted {
		if c.at.Before(cut) {
			delete(w.counted, d)
		}
	}
}

// run counts queued directories and scans the volume every scanEvery (0:
// never) until stop.
func (w *dirWatch) run(stop <-chan struct{}, scanEvery time.Duration) {
	var tick <-chan time.Time
	if scanEvery > 0 {
		t := time.NewTicker(scanEvery)
		defer t.Stop()
		tick = t.C
		w.scan(stop)
	}
	dirty := time.NewTicker(w.recount)
	defer dirty.Stop()
	for {
		select {
		case <-stop:
			return
		case <-dirty.C:
			w.recountDirty()
		case dir := <-w.queue:
			if n, err := countEntries(filepath.Join(w.root, dir)); err == nil {
				w.record(dir, n)
			}
		case <-tick:
			w.scan(stop)
		}
	}
}

// record stores a directory's count, reporting once when it crosses the
// threshold either way.
func (w *dirWatch) record(dir string, n int) {
	w.mu.Lock()
	_, was := w.large[dir]
	large := n >= w.threshold
	if large {
		w.large[dir] = n
	} else {
		delete(w.large, dir)
	}
	w.mu.Unlock()
	if large == was {
		return
	}
	if large {
		w.log.Warn("large directory: listing this prefix and writing into it get slower as it grows; spread keys over more prefixes",
			"directory", dir, "entries", n, "threshold", w.threshold)
	}
	if w.observe != nil {
		w.observe(dir, n, large)
	}
}

// countEntries counts a directory's entries without stat'ing them.
func countEntries(dir string) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(4096)
		n += len(names)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// scan walks every bucket, counting each directory's entries (entry types
// come from readdir, so files are never stat'ed). Hidden directories
// (.strata, .sgwtmp, .vgwlocks) are skipped.
func (w *dirWatch) scan(stop <-chan struct{}) {
	start := time.Now()
	dirs, entries := 0, 0
	seen := map[string]bool{}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var walk func(rel string)
	walk = func(rel string) {
		if stopped() {
			return
		}
		f, err := os.Open(filepath.Join(w.root, rel))
		if err != nil {
			return
		}
		n := 0
		var subdirs []string
		for {
			ents, err := f.ReadDir(4096)
			n += len(ents)
			for _, e := range ents {
				if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
					subdirs = append(subdirs, e.Name())
				}
			}
			if err != nil {
				break
			}
		}
		f.Close()
		dirs++
		entries += n
		seen[rel] = true
		w.record(rel, n)
		for _, d := range subdirs {
			walk(rel + "/" + d)
		}
	}
	top, err := os.ReadDir(w.root)
	if err != nil {
		w.log.Warn("large-directory scan: cannot read the root", "err", err)
		return
	}
	for _, e := range top {
		if e.IsDir() && validBucketName(e.Name()) {
			walk(e.Name())
		}
	}
	if stopped() {
		return
	}
	// Directories that disappeared are no longer large.
	var gone []string
	w.mu.Lock()
	for d := range w.large {
		if !seen[d] {
			gone = append(gone, d)
		}
	}
	w.mu.Unlock()
	for _, d := range gone {
		w.record(d, 0)
	}
	w.log.Debug("large-directory scan done", "directories", dirs, "entries", entries, "took", time.Since(start).Round(time.Millisecond))
}
