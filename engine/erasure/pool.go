package erasure

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
)

// Pool is one server pool: its erasure sets, sharing a deployment ID.
// Objects map to a set by SetIndex; buckets exist on every drive.
type Pool struct {
	deployment uuid.UUID
	sets       []*Set
}

// NewPool groups sets into a pool.
func NewPool(deployment uuid.UUID, sets []*Set) (*Pool, error) {
	if len(sets) == 0 {
		return nil, errors.New("erasure: a pool needs at least one set")
	}
	return &Pool{deployment: deployment, sets: sets}, nil
}

// Sets returns the pool's sets.
func (p *Pool) Sets() []*Set { return p.sets }

// SetFor returns the set an object lives in.
func (p *Pool) SetFor(bucket, object string) *Set {
	return p.sets[SetIndex(p.deployment, bucket, object, len(p.sets))]
}

// forEachSet runs fn on every set and returns the first error.
func (p *Pool) forEachSet(fn func(s *Set) error) error {
	var first error
	for _, s := range p.sets {
		if err := fn(s); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// MakeBucket creates a bucket on every drive; each set needs write quorum.
func (p *Pool) MakeBucket(name string) error {
	info := drive.BucketInfo{Name: name, Created: time.Now().UTC()}
	// Refuse an existing bucket before writing anything.
	if _, err := p.StatBucket(name); err == nil {
		return ErrBucketExists
	} else if !errors.Is(err, ErrBucketNotFound) {
		return err
	}
	return p.forEachSet(func(s *Set) error {
		errs := s.forEach(func(_ int, d Drive) error { return d.MakeBucket(info) })
		return mapDriveErr(reduceErrors(errs, s.layout.WriteQuorum(), ErrWriteQuorum))
	})
}

// StatBucket reads a bucket's record; read quorum in the first set decides.
func (p *Pool) StatBucket(name string) (drive.BucketInfo, error) {
	s := p.sets[0]
	infos := make([]drive.BucketInfo, len(s.drives))
	errs := s.forEach(func(pos int, d Drive) error {
		var err error
		infos[pos], err = d.StatBucket(name)
		return err
	})
	if err := reduceErrors(errs, s.layout.ReadQuorum(), ErrReadQuorum); err != nil {
		return drive.BucketInfo{}, mapDriveErr(err)
	}
	// The newest state among answering drives (versioning may have changed).
	var best drive.BucketInfo
	for pos, info := range infos {
		if errs[pos] == nil && (best.Name == "" || info.Versioning != "" && best.Versioning == "") {
			best = info
		}
	}
	return best, nil
}

// SetBucketVersioning records a bucket's versioning state on every drive.
func (p *Pool) SetBucketVersioning(name, state string) error {
	info, err := p.StatBucket(name)
	if err != nil {
		return err
	}
	info.Versioning = state
	return p.forEachSet(func(s *Set) error {
		errs := s.forEach(func(_ int, d Drive) error { return d.SetBucket(info) })
		return mapDriveErr(reduceErrors(errs, s.layout.WriteQuorum(), ErrWriteQuorum))
	})
}

// ListBuckets lists buckets as read quorum of the first set sees them.
func (p *Pool) ListBuckets() ([]drive.BucketInfo, error) {
	s := p.sets[0]
	lists := make([][]drive.BucketInfo, len(s.drives))
	errs := s.forEach(func(pos int, d Drive) error {
		var err error
		lists[pos], err = d.ListBuckets()
		return err
	})
	if err := reduceErrors(errs, s.layout.ReadQuorum(), ErrReadQuorum); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	byName := map[string]drive.BucketInfo{}
	for _, l := range lists {
		for _, b := range l {
			seen[b.Name]++
			byName[b.Name] = b
		}
	}
	var out []drive.BucketInfo
	for name, n := range seen {
		if n >= s.layout.ReadQuorum() {
			out = append(out, byName[name])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteBucket removes an empty bucket from every drive.
func (p *Pool) DeleteBucket(name string) error {
	if _, err := p.StatBucket(name); err != nil {
		return err
	}
	// Check emptiness everywhere before removing anything.
	empty := true
	err := p.forEachSet(func(s *Set) error {
		entries, err := s.walkBatch(name, "", "", 1)
		if len(entries) > 0 {
			empty = false
		}
		return err
	})
	if err != nil {
		return err
	}
	if !empty {
		return ErrBucketNotEmpty
	}
	return p.forEachSet(func(s *Set) error {
		errs := s.forEach(func(_ int, d Drive) error {
			err := d.DeleteBucket(name, false)
			if errors.Is(err, drive.ErrBucketNotFound) {
				return nil
			}
			return err
		})
		return mapDriveErr(reduceErrors(errs, s.layout.WriteQuorum(), ErrWriteQuorum))
	})
}

// PutObject stores an object in its set.
func (p *Pool) PutObject(bucket, object string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	return p.SetFor(bucket, object).PutObject(bucket, object, r, size, opts)
}

// StatObject resolves an object version.
func (p *Pool) StatObject(bucket, object string, versionID *[16]byte) (ObjectInfo, error) {
	return p.SetFor(bucket, object).StatObject(bucket, object, versionID)
}

// OpenObject resolves an object version for reading.
func (p *Pool) OpenObject(bucket, object string, versionID *[16]byte) (*ObjectHandle, error) {
	return p.SetFor(bucket, object).OpenObject(bucket, object, versionID)
}

// GetObject streams a range of an object version to w.
func (p *Pool) GetObject(w io.Writer, bucket, object string, versionID *[16]byte, offset, length int64) (ObjectInfo, []int, error) {
	return p.SetFor(bucket, object).GetObject(w, bucket, object, versionID, offset, length)
}

// DeleteObject deletes an object or one of its versions.
func (p *Pool) DeleteObject(bucket, object string, versionID *[16]byte, mode DeleteMode) (*ObjectInfo, error) {
	return p.SetFor(bucket, object).DeleteObject(bucket, object, versionID, mode)
}

// String describes the pool's shape.
func (p *Pool) String() string {
	l := p.sets[0].layout
	return fmt.Sprintf("%d sets of %d+%d", len(p.sets), l.Data, l.Parity)
}
