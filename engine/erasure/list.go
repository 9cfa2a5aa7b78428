package erasure

import (
	"sort"
	"strings"

	"github.com/strata-storage/strata/engine/drive"
)

// listEntry is one object with its versions, newest first.
type listEntry struct {
	name     string
	versions []*drive.Record
}

// walkBatch returns up to limit objects of a set after startAfter, merged
// from parity+1 drives: a committed write reached write quorum, so at least
// one of any parity+1 drives holds it. For each object the versions of the
// drive holding the newest one are used.
func (s *Set) walkBatch(bucket, prefix, startAfter string, limit int) ([]listEntry, error) {
	need := s.layout.Parity + 1
	byName := map[string]listEntry{}
	answered := 0
	var lastErr error
	for _, d := range s.drives {
		if d == nil || answered == need {
			continue
		}
		seen := 0
		err := d.WalkObjects(bucket, prefix, startAfter, func(name string, versions []*drive.Record) bool {
			if cur, ok := byName[name]; !ok || versions[0].Newer(cur.versions[0]) {
				byName[name] = listEntry{name: name, versions: versions}
			}
			seen++
			return seen < limit
		})
		if err != nil {
			lastErr = err
			continue
		}
		answered++
	}
	// With drives offline fewer than parity+1 may answer; the listing is
	// then best effort over the drives that did (writes have stopped by
	// then: fewer than write quorum drives are left).
	if answered == 0 {
		if lastErr != nil {
			return nil, lastErr
		}
		return nil, ErrReadQuorum
	}
	out := make([]listEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// walkPool merges the sets' batches in key order. Only keys up to the
// smallest "last key" of a set that filled its batch are complete, so the
// merge stops there.
func (p *Pool) walkPool(bucket, prefix, startAfter string, limit int) (entries []listEntry, more bool, err error) {
	var all []listEntry
	bound := ""
	for _, s := range p.sets {
		batch, err := s.walkBatch(bucket, prefix, startAfter, limit)
		if err != nil {
			return nil, false, err
		}
		if len(batch) == limit {
			last := batch[len(batch)-1].name
			if bound == "" || last < bound {
				bound = last
			}
			more = true
		}
		all = append(all, batch...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	if bound != "" {
		n := sort.Search(len(all), func(i int) bool { return all[i].name > bound })
		all = all[:n]
	}
	return all, more, nil
}

// ListResult is one page of a listing.
type ListResult struct {
	Objects        []ObjectInfo
	CommonPrefixes []string
	IsTruncated    bool
	// NextMarker is the last key or common prefix returned, to continue from.
	NextMarker string
}

// maxListKey sorts after every valid UTF-8 key with a given prefix: 0xff
// never occurs in UTF-8.
const maxListKey = "\xff"

// ListObjects lists the latest versions of a bucket's objects in key order,
// skipping delete markers, grouping keys that contain delimiter after prefix
// into common prefixes, at most maxKeys entries (objects plus prefixes).
func (p *Pool) ListObjects(bucket, prefix, startAfter, delimiter string, maxKeys int) (ListResult, error) {
	if _, err := p.StatBucket(bucket); err != nil {
		return ListResult{}, err
	}
	var res ListResult
	if maxKeys <= 0 {
		return res, nil
	}
	cursor := startAfter
	// A marker that is itself a common prefix (a NextMarker) continues after
	// everything under it.
	if delimiter != "" && strings.HasPrefix(cursor, prefix) {
		if i := strings.Index(cursor[len(prefix):], delimiter); i >= 0 && len(prefix)+i+len(delimiter) == len(cursor) {
			cursor += maxListKey
		}
	}
	const batch = 1000
	for {
		entries, more, err := p.walkPool(bucket, prefix, cursor, batch)
		if err != nil {
			return ListResult{}, err
		}
		for _, e := range entries {
			if e.name <= cursor {
				continue // inside a common prefix already emitted
			}
			if len(res.Objects)+len(res.CommonPrefixes) == maxKeys {
				res.IsTruncated = true
				return res, nil
			}
			if delimiter != "" {
				if i := strings.Index(e.name[len(prefix):], delimiter); i >= 0 {
					cp := e.name[:len(prefix)+i+len(delimiter)]
					res.CommonPrefixes = append(res.CommonPrefixes, cp)
					res.NextMarker = cp
					cursor = cp + maxListKey
					continue
				}
			}
			cursor = e.name
			latest := e.versions[0]
			if latest.IsDeleteMarker() {
				continue
			}
			res.Objects = append(res.Objects, infoFromRecord(bucket, e.name, latest))
			res.NextMarker = e.name
		}
		if !more {
			return res, nil
		}
	}
}
