package erasure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// listEntry is one object with its versions, newest first.
type listEntry struct {
	name     string
	versions []*drive.Record
	// doubtful are the versions some drive that answered the walk did not
	// list (walkDrives): all of them when a drive did not list the object.
	// Set.walk checks such objects before listing them.
	doubtful []*drive.Record
}

// walker lists a bucket's objects in key order, up to limit entries after
// startAfter; more reports that entries past the returned ones may exist.
// With a delimiter (latest versions only), a walker may leave out objects
// under a common prefix after one of them whose newest version is not a
// delete marker, as drive.Local's WalkDelimited does; delimits reports
// whether it does, so a listing knows whether a large batch costs reading
// every key under a prefix. A set, a pool and the pools of a deployment
// are walkers.
type walker interface {
	walk(ctx context.Context, bucket, prefix, delimiter, startAfter string, limit int, latestOnly bool) (entries []listEntry, more bool, err error)
	delimits() bool
}

// delimitedWalker is a drive that walks a listing with a delimiter itself
// (drive.Local, and internode.RemoteDrive through its peer).
type delimitedWalker interface {
	WalkDelimited(ctx context.Context, bucket, prefix, delimiter, startAfter string, fn func(object string, versions []*drive.Record) bool) error
}

// listRotor spreads listings over the drives of a set.
var listRotor atomic.Uint32

// walk returns up to limit objects of a set after startAfter, merged from
// Layout.ListDrives drives: a committed write reached write quorum, so at
// least one of any that many drives holds it. An object's versions are the union of
// what those drives hold, newest first.
//
// A drive of the walk may also hold what a GET would not return: a delete
// that reached write quorum but not every drive (a node killed meanwhile)
// leaves the object on the drives that missed it until they are healed,
// and a write that failed may leave its record on a drive that answered
// too late to be rolled back, until the dangling-version cleanup. So where
// the drives of the walk do not list the same versions of an object, the
// object is resolved as a GET resolves it (read quorum) before it is
// listed: a listing of latest versions lists the version a GET would
// return, or leaves the object out when it is gone; a listing of versions
// keeps each doubtful version only if a GET of that version returns it.
// Drives that agree cost nothing more.
//
// A batch is never empty while more follows: when every object of a batch
// turned out deleted, the set walks on past them (a caller takes an empty
// batch for the end of the set).
func (s *Set) walk(ctx context.Context, bucket, prefix, delimiter, startAfter string, limit int, latestOnly bool) ([]listEntry, bool, error) {
	for {
		entries, more, err := s.walkListing(ctx, bucket, prefix, delimiter, startAfter, limit, latestOnly)
		if err != nil || len(entries) == 0 {
			return entries, more, err
		}
		last := entries[len(entries)-1].name
		s.checkVersions(ctx, bucket, entries, latestOnly)
		out := entries[:0]
		for _, e := range entries {
			if len(e.versions) > 0 {
				out = append(out, e)
			} // else deleted; drives that missed it still list it
		}
		if len(out) > 0 || !more {
			return out, more, nil
		}
		startAfter = last
	}
}

// checksAtOnce bounds the GETs a batch's check runs at once (a drive the
// walk read may lack many objects: one replaced and being rebuilt).
const checksAtOnce = 8

// versionCheck is one GET checkVersions runs: of the latest version
// (versionID nil), or of one version ID.
type versionCheck struct {
	entry     int
	versionID *[16]byte
	rec       *drive.Record // what the GET returned
	gone      bool          // the GET found no such version
}

// checkVersions sets the versions of the entries whose drives did not
// agree (doubtful) to what GETs return: for a listing of latest versions
// the one a GET returns; otherwise each doubtful version ID's record as a
// GET of that ID returns it, the others unchanged. None: the object is
// gone. A version a read quorum cannot tell about (drives offline) stays
// as the walk found it. Those objects are queued to be healed.
func (s *Set) checkVersions(ctx context.Context, bucket string, entries []listEntry, latestOnly bool) {
	var checks []versionCheck
	for i, e := range entries {
		if len(e.doubtful) == 0 {
			continue
		}
		if latestOnly {
			checks = append(checks, versionCheck{entry: i})
			continue
		}
		asked := make(map[[16]byte]bool, len(e.doubtful))
		for _, v := range e.doubtful {
			if !asked[v.VersionID] {
				asked[v.VersionID] = true
				checks = append(checks, versionCheck{entry: i, versionID: &v.VersionID})
			}
		}
	}
	if len(checks) == 0 {
		return
	}
	sem := make(chan struct{}, checksAtOnce)
	var wg sync.WaitGroup
	for i := range checks {
		c := &checks[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			h, err := s.openObject(ctx, bucket, entries[c.entry].name, c.versionID, openMeta)
			switch {
			case errors.Is(err, objlayer.ErrObjectNotFound):
				c.gone = true
			case err == nil:
				c.rec = h.rec
			}
		}()
	}
	wg.Wait()
	for first := 0; first < len(checks); {
		i, next := checks[first].entry, first+1
		for next < len(checks) && checks[next].entry == i {
			next++
		}
		// The drives disagree until the object is healed: queue it, or
		// every listing that reads them pays these GETs again (a node
		// back after long, its missed objects forgotten by a restart).
		// Not for versions this recent: a write still committing is
		// left to its own heal.
		if settledDisagreement(entries[i].doubtful, time.Now()) {
			s.partialWrite(bucket, entries[i].name, objlayer.NullVersion)
		}
		entries[i].versions = checkedVersions(entries[i].versions, checks[first:next], latestOnly)
		first = next
	}
}

// listHealAfter is how old a version the drives of a listing disagree on
// must be for the listing to queue its object to be healed.
var listHealAfter = 10 * time.Second

// settledDisagreement reports whether any of the doubtful versions is
// older than listHealAfter.
func settledDisagreement(doubtful []*drive.Record, now time.Time) bool {
	for _, v := range doubtful {
		if now.Sub(time.Unix(0, v.ModTime)) >= listHealAfter {
			return true
		}
	}
	return false
}

// checkedVersions applies an entry's checks to its versions.
func checkedVersions(vs []*drive.Record, checks []versionCheck, latestOnly bool) []*drive.Record {
	if latestOnly {
		switch c := checks[0]; {
		case c.gone:
			return nil
		case c.rec != nil:
			return []*drive.Record{c.rec}
		}
		return vs
	}
	byID := make(map[[16]byte]*versionCheck, len(checks))
	for i := range checks {
		byID[*checks[i].versionID] = &checks[i]
	}
	out := make([]*drive.Record, 0, len(vs))
	for _, v := range vs {
		c, checked := byID[v.VersionID]
		switch {
		case !checked || !c.gone && c.rec == nil:
			out = append(out, v)
		case c.rec != nil:
			// The GET's record, once for its ID (a null version may
			// have several records on the drives).
			out = append(out, c.rec)
			c.rec = nil
			c.gone = true
		}
	}
	sortNewestFirst(out)
	return out
}

// delimits reports whether every drive of the set walks delimited
// listings itself.
func (s *Set) delimits() bool {
	for _, d := range s.Drives() {
		if _, ok := d.(delimitedWalker); d != nil && !ok {
			return false
		}
	}
	return true
}

// walkDrives is walk over need drives (all of them, for healing, so an
// object missing from every drive read by a listing is still found). The
// drives are walked at once, each into a list of its own in key order,
// and the lists are merged: a drive that fails is replaced by the next.
func (s *Set) walkDrives(ctx context.Context, bucket, prefix, delimiter, startAfter string, limit, need int, latestOnly bool) ([]listEntry, bool, error) {
	drives := s.Drives()
	start := int(listRotor.Add(1))
	var candidates []Drive
	for k := range drives {
		if d := drives[(start+k)%len(drives)]; d != nil {
			candidates = append(candidates, d)
		}
	}
	var walks []*driveWalk
	var lastErr error
	for answered := 0; answered < need && len(candidates) > 0; {
		wave := candidates[:min(need-answered, len(candidates))]
		candidates = candidates[len(wave):]
		results := make([]*driveWalk, len(wave))
		var wg sync.WaitGroup
		for i, d := range wave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = walkDrive(ctx, d, bucket, prefix, delimiter, startAfter, limit, latestOnly)
			}()
		}
		wg.Wait()
		for _, w := range results {
			if w.err != nil {
				lastErr = w.err
				continue
			}
			walks = append(walks, w)
			answered++
		}
	}
	// With drives offline fewer than need may answer; the listing is
	// then best effort over the drives that did (writes have stopped by
	// then: fewer than write quorum drives are left).
	if len(walks) == 0 {
		// No drive answered: the set cannot be listed now (503 SlowDown,
		// which clients retry), not an internal error.
		if lastErr != nil {
			return nil, false, fmt.Errorf("%w: no drive of the set answered a listing (%w)", objlayer.ErrReadQuorum, lastErr)
		}
		return nil, false, objlayer.ErrReadQuorum
	}
	filled := false
	for _, w := range walks {
		filled = filled || len(w.names) == limit
	}
	return mergeDriveWalks(walks, limit), filled, nil
}

// driveWalk is what one drive listed, in key order.
type driveWalk struct {
	names    []string
	versions [][]*drive.Record
	err      error
}

func walkDrive(ctx context.Context, d Drive, bucket, prefix, delimiter, startAfter string, limit int, latestOnly bool) *driveWalk {
	w := &driveWalk{}
	add := func(name string, versions []*drive.Record) bool {
		w.names = append(w.names, name)
		w.versions = append(w.versions, versions)
		return len(w.names) < limit
	}
	if dw, ok := d.(delimitedWalker); ok && delimiter != "" && latestOnly {
		w.err = dw.WalkDelimited(ctx, bucket, prefix, delimiter, startAfter, add)
	} else {
		w.err = d.WalkObjects(ctx, bucket, prefix, startAfter, latestOnly, add)
	}
	return w
}

// mergeDriveWalks merges drives' walks by key, at most limit entries: each
// key's versions are the union of what the drives hold, newest first, and
// a key some drive did not list is partial. A drive that filled its batch
// stopped at its last key; keys past the first such stop are left for the
// next walk rather than taken for keys that drive lacks.
func mergeDriveWalks(walks []*driveWalk, limit int) []listEntry {
	pos := make([]int, len(walks))
	stop, stopped := "", false
	for _, w := range walks {
		if n := len(w.names); n == limit && n > 0 && (!stopped || w.names[n-1] < stop) {
			stop, stopped = w.names[n-1], true
		}
	}
	var out []listEntry
	var lists [][]*drive.Record // what each walk that listed the key holds of it
	for len(out) < limit {
		next, found := "", false
		for i, w := range walks {
			if pos[i] < len(w.names) && (!found || w.names[pos[i]] < next) {
				next, found = w.names[pos[i]], true
			}
		}
		if !found || stopped && next > stop {
			break
		}
		e := listEntry{name: next}
		lists, held := lists[:0], 0
		for i, w := range walks {
			if pos[i] < len(w.names) && w.names[pos[i]] == next {
				vs := w.versions[pos[i]]
				e.versions = addVersions(e.versions, vs)
				lists = append(lists, vs)
				held += len(vs)
				pos[i]++
			}
		}
		// Each walk lists a version once: the walks agree when every one
		// listed the object with every version of the union.
		if len(lists) < len(walks) || held != len(lists)*len(e.versions) {
			e.doubtful = doubtfulVersions(e.versions, lists, len(walks))
		}
		if len(e.versions) > 1 {
			sortNewestFirst(e.versions)
		}
		out = append(out, e)
	}
	return out
}

// doubtfulVersions returns the versions of vs (the union of the walks'
// lists of one object) that not each of the walks lists: lists holds
// the lists of those that listed the object.
func doubtfulVersions(vs []*drive.Record, lists [][]*drive.Record, walks int) []*drive.Record {
	count := make(map[versionKey]int, len(vs))
	for _, l := range lists {
		seen := make(map[versionKey]bool, len(l))
		for _, v := range l {
			if k := keyOf(v); !seen[k] {
				seen[k] = true
				count[k]++
			}
		}
	}
	var out []*drive.Record
	for _, v := range vs {
		if count[keyOf(v)] < walks {
			out = append(out, v)
		}
	}
	return out
}

// addVersions adds to vs the versions it does not hold yet (a scan for the
// usual handful, a set for keys with many versions).
func addVersions(vs, more []*drive.Record) []*drive.Record {
	if len(vs) == 0 {
		return append(vs, more...)
	}
	if len(vs)*len(more) > 256 {
		held := make(map[versionKey]bool, len(vs))
		for _, v := range vs {
			held[keyOf(v)] = true
		}
		for _, v := range more {
			if k := keyOf(v); !held[k] {
				held[k] = true
				vs = append(vs, v)
			}
		}
		return vs
	}
	for _, v := range more {
		k, dup := keyOf(v), false
		for _, have := range vs {
			dup = dup || keyOf(have) == k
		}
		if !dup {
			vs = append(vs, v)
		}
	}
	return vs
}

// unionVersions merges two version lists (newest first) without
// duplicates.
func unionVersions(a, b []*drive.Record) []*drive.Record {
	out := addVersions(slices.Clone(a), b)
	sortNewestFirst(out)
	return out
}

// sortNewestFirst orders a key's versions newest first.
func sortNewestFirst(vs []*drive.Record) {
	sort.Slice(vs, func(i, j int) bool { return vs[i].Newer(vs[j]) })
}

// versionKey identifies a version across drives.
type versionKey struct {
	id      [16]byte
	modTime int64
}

func keyOf(r *drive.Record) versionKey { return versionKey{r.VersionID, r.ModTime} }

// mergeWalks merges the batches of several walkers in key order. Only keys
// up to the smallest last key of a walker that filled its batch are
// complete, so the merge stops there. An object found in several walkers
// (pools during a move) keeps the versions of the one with the newest.
func mergeWalks[W walker](ctx context.Context, ws []W, bucket, prefix, delimiter, startAfter string, limit int, latestOnly bool) ([]listEntry, bool, error) {
	var all []listEntry
	bound, more := "", false
	for _, w := range ws {
		batch, filled, err := w.walk(ctx, bucket, prefix, delimiter, startAfter, limit, latestOnly)
		if err != nil {
			return nil, false, err
		}
		if filled && len(batch) > 0 {
			last := batch[len(batch)-1].name
			if !more || last < bound {
				bound = last
			}
			more = true
		}
		all = append(all, batch...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].name < all[j].name })
	out := all[:0]
	for _, e := range all {
		if n := len(out); n > 0 && out[n-1].name == e.name {
			out[n-1].versions = unionVersions(out[n-1].versions, e.versions)
			continue
		}
		out = append(out, e)
	}
	if more {
		n := sort.Search(len(out), func(i int) bool { return out[i].name > bound })
		out = out[:n]
	}
	return out, more, nil
}

// walk merges the pool's sets.
func (p *Pool) walk(ctx context.Context, bucket, prefix, delimiter, startAfter string, limit int, latestOnly bool) ([]listEntry, bool, error) {
	return mergeWalks(ctx, p.sets, bucket, prefix, delimiter, startAfter, limit, latestOnly)
}

func (p *Pool) delimits() bool { return allDelimit(p.sets) }

// allDelimit reports whether every walker delimits.
func allDelimit[W walker](ws []W) bool {
	for _, w := range ws {
		if !w.delimits() {
			return false
		}
	}
	return true
}

// maxListKey sorts after every valid UTF-8 key with a given prefix: 0xff
// never occurs in UTF-8.
const maxListKey = drive.PastPrefix

// listBatch is the largest walk: S3's largest page (1,000) and one more,
// which tells whether the page is truncated (pageBatch).
const listBatch = 1000 + 1

// prefixProbe is the batch a listing with a delimiter starts with, and
// walks again right after it rolled keys up into a common prefix: the rest
// of a larger batch would mostly be keys under that prefix, read and thrown
// away. So the walk starts again past the prefix with two keys, and grows
// back to listBatch once keys are listed one by one. (A LIST with a
// delimiter over 100,000 keys in 100 directories read every key at first,
// about 3,200 with a probe of 32; now about 200, a walk of two keys per
// directory.)
const prefixProbe = 2

// firstBatch is the size of a listing's first walk: a probe with a
// delimiter, unless the walker skips the keys under a prefix itself.
func firstBatch(w walker, delimiter string) int {
	if delimiter != "" && !w.delimits() {
		return prefixProbe
	}
	return listBatch
}

// nextBatch is the size of a listing's next walk: small after a common
// prefix (unless the walker skips prefixes), then doubling up to
// listBatch.
func nextBatch(w walker, last int, afterPrefix bool) int {
	if afterPrefix && !w.delimits() {
		return prefixProbe
	}
	return min(2*last, listBatch)
}

// pageBatch caps a walk at what a page of maxKeys entries still needs
// (listed of them are in it) and one more: the one more tells whether the
// page is truncated. (Without the cap a page of 1,000 read 2,000 objects:
// its last walk of a full batch only found that the page was full.)
func pageBatch(batch, maxKeys, listed int) int {
	return max(1, min(batch, maxKeys-listed+1))
}

// commonPrefix returns the common prefix key rolls up into, if any.
func commonPrefix(key, prefix, delimiter string) (string, bool) {
	return drive.CommonPrefix(key, prefix, delimiter)
}

// listCursor turns a marker that is itself a common prefix (a NextMarker)
// into a cursor past everything under it.
func listCursor(marker, prefix, delimiter string) string {
	if cp, ok := commonPrefix(marker, prefix, delimiter); ok && cp == marker {
		return marker + maxListKey
	}
	return marker
}

// listObjects lists the latest versions of a bucket's objects in key order,
// skipping delete markers, grouping keys that contain delimiter after prefix
// into common prefixes, at most maxKeys entries (objects plus prefixes).
func listObjects(ctx context.Context, w walker, bucket, prefix, marker, delimiter string, maxKeys int) (objlayer.ListResult, error) {
	var res objlayer.ListResult
	if maxKeys <= 0 {
		return res, nil
	}
	cursor := listCursor(marker, prefix, delimiter)
	for batch := firstBatch(w, delimiter); ; {
		batch = pageBatch(batch, maxKeys, len(res.Objects)+len(res.CommonPrefixes))
		entries, more, err := w.walk(ctx, bucket, prefix, delimiter, cursor, batch, true)
		if err != nil {
			return objlayer.ListResult{}, err
		}
		skipped := false
		for _, e := range entries {
			if e.name <= cursor {
				skipped = true // inside a common prefix already emitted
				continue
			}
			latest := e.versions[0]
			if latest.IsDeleteMarker() {
				cursor = e.name
				continue
			}
			cp, isPrefix := commonPrefix(e.name, prefix, delimiter)
			if len(res.Objects)+len(res.CommonPrefixes) == maxKeys {
				res.IsTruncated = true
				return res, nil
			}
			if isPrefix {
				res.CommonPrefixes = append(res.CommonPrefixes, cp)
				res.NextMarker = cp
				cursor = cp + maxListKey
				continue
			}
			cursor = e.name
			res.Objects = append(res.Objects, infoFromRecord(bucket, e.name, latest))
			res.NextMarker = e.name
		}
		if !more {
			return res, nil
		}
		batch = nextBatch(w, batch, skipped)
	}
}

// listVersions lists every version and delete marker of a bucket's objects,
// keys in order and each key's versions newest first, starting after
// (keyMarker, versionMarker).
func listVersions(ctx context.Context, w walker, bucket, prefix, keyMarker string, versionMarker *[16]byte, delimiter string, maxKeys int) (objlayer.ListResult, error) {
	var res objlayer.ListResult
	if maxKeys <= 0 {
		return res, nil
	}
	// emit adds one entry's versions (those after skipUntil, when given);
	// it reports false when the page is full.
	emit := func(e listEntry, skipUntil *[16]byte) bool {
		vs := e.versions
		if skipUntil != nil {
			vs = objlayer.VersionsAfter(vs, *skipUntil, func(v *drive.Record) ([16]byte, time.Time) {
				return v.VersionID, time.Unix(0, v.ModTime)
			})
		}
		for _, v := range vs {
			if len(res.Objects)+len(res.CommonPrefixes) == maxKeys {
				res.IsTruncated = true
				return false
			}
			info := infoFromRecord(bucket, e.name, v)
			info.IsLatest = v == e.versions[0]
			res.Objects = append(res.Objects, info)
			res.NextMarker, res.NextVersionMarker = e.name, formatID(v.VersionID)
		}
		return true
	}
	cursor := listCursor(keyMarker, prefix, delimiter)
	if versionMarker != nil && keyMarker != "" && cursor == keyMarker {
		// Finish the marker key's own versions first.
		entries, _, err := w.walk(ctx, bucket, keyMarker, "", "", 1, false)
		if err != nil {
			return objlayer.ListResult{}, err
		}
		if len(entries) > 0 && entries[0].name == keyMarker {
			if !emit(entries[0], versionMarker) {
				return res, nil
			}
		}
	}
	// Version listings walk every version: the drives do not skip.
	for batch := firstBatch(plainWalker{w}, delimiter); ; {
		batch = pageBatch(batch, maxKeys, len(res.Objects)+len(res.CommonPrefixes))
		entries, more, err := w.walk(ctx, bucket, prefix, "", cursor, batch, false)
		if err != nil {
			return objlayer.ListResult{}, err
		}
		skipped := false
		for _, e := range entries {
			if e.name <= cursor {
				skipped = true
				continue
			}
			if cp, ok := commonPrefix(e.name, prefix, delimiter); ok {
				if len(res.Objects)+len(res.CommonPrefixes) == maxKeys {
					res.IsTruncated = true
					return res, nil
				}
				res.CommonPrefixes = append(res.CommonPrefixes, cp)
				res.NextMarker, res.NextVersionMarker = cp, ""
				cursor = cp + maxListKey
				continue
			}
			cursor = e.name
			if !emit(e, nil) {
				return res, nil
			}
		}
		if !more {
			return res, nil
		}
		batch = nextBatch(plainWalker{w}, batch, skipped)
	}
}

// plainWalker is a walker taken as one that does not delimit.
type plainWalker struct{ walker }

func (plainWalker) delimits() bool { return false }
