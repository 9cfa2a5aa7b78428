package gateway

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/versity/versitygw/s3api/utils"
)

// dirWatch finds directories with more entries than a threshold. Listing a
// prefix reads and sorts its whole directory for every page, and most
// filesystems slow down on lookups and creates in huge directories, so a
// flat namespace of millions of keys in one prefix is where a POSIX
// gateway falls over (docs/gateway.md has the measurements). Two sources:
//
//   - writes through S3: the parent directory of a written key is counted
//     (in the background, at most once per recount interval per directory,
//     and once more an interval after the last write);
//   - a slow periodic scan of the whole volume, which also sees
//     directories grown through POSIX.
//
// Directories past the threshold are logged once and exported as metrics.
type dirWatch struct {
	root      string
	threshold int
	recount   time.Duration
	log       *slog.Logger

	mu      sync.Mutex
	counted map[string]*counted // directory -> write-path bookkeeping
	large   map[string]int      // directory -> entries, for those past the threshold
	queue   chan string
}

// counted is when a directory written through S3 was last counted, and
// whether writes came after (it is counted again one interval later, so the
// last burst of writes into a directory is never missed).
type counted struct {
	at    time.Time
	dirty bool
}

// maxCounted bounds the write-path bookkeeping; past it, the oldest half is
// forgotten.
const maxCounted = 100_000

func newDirWatch(root string, threshold int, recount time.Duration, log *slog.Logger) *dirWatch {
	return &dirWatch{root: root, threshold: threshold, recount: recount, log: log,
		counted: map[string]*counted{}, large: map[string]int{}, queue: make(chan string, 1024)}
}

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
// never) until ctx ends.
func (w *dirWatch) run(ctx context.Context, scanEvery time.Duration) {
	if w.threshold <= 0 {
		return
	}
	var tick <-chan time.Time
	if scanEvery > 0 {
		t := time.NewTicker(scanEvery)
		defer t.Stop()
		tick = t.C
		go w.scan(ctx)
	}
	dirty := time.NewTicker(w.recount)
	defer dirty.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-dirty.C:
			w.recountDirty()
		case dir := <-w.queue:
			if n, err := countEntries(filepath.Join(w.root, dir)); err == nil {
				w.record(dir, n)
			}
		case <-tick:
			w.scan(ctx)
		}
	}
}

// record stores a directory's count, logging once when it crosses the
// threshold.
func (w *dirWatch) record(dir string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, was := w.large[dir]
	switch {
	case n >= w.threshold && !was:
		w.log.Warn("large directory: listing this prefix and writing into it get slower as it grows; spread keys over more prefixes",
			"directory", dir, "entries", n, "threshold", w.threshold)
		w.large[dir] = n
	case n >= w.threshold:
		w.large[dir] = n
	case was:
		delete(w.large, dir)
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

// scan walks every bucket, counting each directory's entries (directory
// entry types come from readdir, so files are never stat'ed). The hidden
// directories (.strata, .sgwtmp, .vgwlocks) are skipped.
func (w *dirWatch) scan(ctx context.Context) {
	start := time.Now()
	dirs, entries := 0, 0
	seen := map[string]bool{}
	var walk func(rel string)
	walk = func(rel string) {
		if ctx.Err() != nil {
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
		if e.IsDir() && utils.IsValidBucketName(e.Name()) {
			walk(e.Name())
		}
	}
	if ctx.Err() != nil {
		return
	}
	// Directories that disappeared are no longer large.
	w.mu.Lock()
	for d := range w.large {
		if !seen[d] {
			delete(w.large, d)
		}
	}
	w.mu.Unlock()
	w.log.Debug("large-directory scan done", "directories", dirs, "entries", entries, "took", time.Since(start).Round(time.Millisecond))
}

// exportedLargeDirs bounds the per-directory series: the largest ones.
const exportedLargeDirs = 20

// Describe implements prometheus.Collector.
func (w *dirWatch) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLargeDirs
	ch <- descDirEntries
	ch <- descDirThreshold
}

// Collect implements prometheus.Collector.
func (w *dirWatch) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	type dir struct {
		name string
		n    int
	}
	list := make([]dir, 0, len(w.large))
	for d, n := range w.large {
		list = append(list, dir{d, n})
	}
	w.mu.Unlock()
	slices.SortFunc(list, func(a, b dir) int { return b.n - a.n })
	ch <- prometheus.MustNewConstMetric(descLargeDirs, prometheus.GaugeValue, float64(len(list)))
	ch <- prometheus.MustNewConstMetric(descDirThreshold, prometheus.GaugeValue, float64(w.threshold))
	for _, d := range list[:min(len(list), exportedLargeDirs)] {
		ch <- prometheus.MustNewConstMetric(descDirEntries, prometheus.GaugeValue, float64(d.n), d.name)
	}
}

var (
	descLargeDirs = prometheus.NewDesc("strata_gateway_large_directories",
		"Directories with at least strata_gateway_large_directory_threshold entries (listing them and writing into them is slow).", nil, nil)
	descDirEntries = prometheus.NewDesc("strata_gateway_large_directory_entries",
		"Entries of a directory past the threshold (the 20 largest), as bucket/prefix.", []string{"directory"}, nil)
	descDirThreshold = prometheus.NewDesc("strata_gateway_large_directory_threshold",
		"Entries from which a directory is reported as large (--large-dir-threshold).", nil, nil)
)
