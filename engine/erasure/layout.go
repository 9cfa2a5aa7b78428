// Package erasure is the erasure-coded object layer: erasure-set math,
// quorum rules and the Reed-Solomon codec that stripes objects over a set.
package erasure

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"
)

// Set size bounds.
const (
	MinSetSize = 2
	MaxSetSize = 16
)

// SetSize picks the erasure-set size for a pool of drives spread evenly over
// servers: the largest size in 2..16 that divides the drive count and
// stripes evenly over the servers (each set takes the same number of drives
// from every server it touches, or one drive from each of size servers).
func SetSize(drives, servers int) (int, error) {
	if servers < 1 || drives < MinSetSize || drives%servers != 0 {
		return 0, fmt.Errorf("erasure: %d drives cannot be spread evenly over %d servers", drives, servers)
	}
	for size := MaxSetSize; size >= MinSetSize; size-- {
		if drives%size != 0 {
			continue
		}
		if size%servers == 0 || servers%size == 0 {
			return size, nil
		}
	}
	return 0, fmt.Errorf("erasure: no set size in %d..%d divides %d drives evenly over %d servers",
		MinSetSize, MaxSetSize, drives, servers)
}

// DefaultParity is the parity of a set when none is configured: 2-3 drives
// 1, 4-5 drives 2, 6-7 drives 3, 8 or more 4.
func DefaultParity(setSize int) int {
	switch {
	case setSize <= 3:
		return 1
	case setSize <= 5:
		return 2
	case setSize <= 7:
		return 3
	default:
		return 4
	}
}

// Layout is a validated erasure shape.
type Layout struct {
	Data, Parity int
}

// NewLayout checks a set size and parity.
func NewLayout(setSize, parity int) (Layout, error) {
	if setSize < MinSetSize || setSize > MaxSetSize {
		return Layout{}, fmt.Errorf("erasure: set size %d outside %d..%d", setSize, MinSetSize, MaxSetSize)
	}
	if parity < 1 || parity > setSize/2 {
		return Layout{}, fmt.Errorf("erasure: parity %d must be between 1 and half the set (%d)", parity, setSize/2)
	}
	return Layout{Data: setSize - parity, Parity: parity}, nil
}

// SetSize is the number of drives (shards) per set.
func (l Layout) SetSize() int { return l.Data + l.Parity }

// ReadQuorum is the number of intact shards a read needs: the data shards.
func (l Layout) ReadQuorum() int { return l.Data }

// WriteQuorum is the number of drives that must commit a write: the data
// shards, plus one when data equals parity, so two writes that each reached
// a quorum always share a drive (no split brain on an even split).
func (l Layout) WriteQuorum() int {
	if l.Data == l.Parity {
		return l.Data + 1
	}
	return l.Data
}

// ListDrives is the number of drives a listing reads to see every
// committed write: a write reached WriteQuorum drives, so any
// SetSize-WriteQuorum+1 drives include one of them (2 of 4 drives at 2+2,
// 3 of 6 at 4+2, 4 of 8 at 4+4).
func (l Layout) ListDrives() int { return l.SetSize() - l.WriteQuorum() + 1 }

// SetIndex is the erasure set of an object: a hash of the object's name
// keyed by the deployment, so the spread differs between deployments but
// never changes within one. This mapping is part of the on-disk contract.
func SetIndex(deployment uuid.UUID, bucket, object string, sets int) int {
	if sets <= 1 {
		return 0
	}
	h := xxhash.New()
	_, _ = h.Write(deployment[:])
	_, _ = h.WriteString(bucket)
	_, _ = h.Write([]byte{'/'})
	_, _ = h.WriteString(object)
	return int(h.Sum64() % uint64(sets))
}

// Distribution says which shard each position of a set holds for an object:
// a rotation chosen by the object's hash, so parity (and the extra load of
// serving data shards) spreads over all drives of the set rather than
// always landing on the same ones. Distribution[pos] = shard number.
func Distribution(bucket, object string, setSize int) []int {
	start := int(xxhash.Sum64String(bucket+"/"+object) % uint64(setSize))
	d := make([]int, setSize)
	for pos := range d {
		d[pos] = (pos - start + setSize) % setSize
	}
	return d
}
