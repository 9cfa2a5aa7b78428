// Package drive is one drive of the erasure-coded server: its format file,
// the codec of the version records kept in its metadata store, and its shard
// files with per-block bitrot checksums. A drive is a directory (a PVC mount).
//
// On-disk layout under the drive root:
//
//	.strata/format.json     identity of the drive (Format)
//	.strata/meta/           metadata store (version records)
//	.strata/data/...        shard files of objects above the inline threshold
//	.strata/tmp/            staging area on the same filesystem
package drive

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Format file versions. A drive formatted by a newer build is refused with a
// message naming both versions, rather than misread.
const (
	FormatMagic = "strata-drive"
	// FormatVersion is the version this build writes. Version 2 keeps all
	// versions of an object under one metadata key.
	FormatVersion = 2
	// FormatMinReadVersion is the oldest version this build reads.
	FormatMinReadVersion = 2
)

// ErrUnformatted means the drive has no format file: it is new, or was wiped
// or replaced, and should be formatted into its slot and healed.
var ErrUnformatted = errors.New("drive is not formatted")

// Format identifies a drive: which deployment, pool and erasure set it
// belongs to and where in the set it sits.
type Format struct {
	// DeploymentID is shared by every drive of a tenant.
	DeploymentID uuid.UUID `json:"deploymentID"`
	// Pool is the index of the drive's server pool, in topology order at
	// formatting time; PoolName is its name (the identity that counts).
	Pool     int    `json:"pool"`
	PoolName string `json:"poolName,omitempty"`
	// Set is the index of the drive's erasure set within the pool.
	Set int `json:"set"`
	// Index is the drive's position within its set.
	Index int `json:"index"`
	// DriveID identifies this drive; a replaced drive gets a new one.
	DriveID uuid.UUID `json:"driveID"`
	// Sets and SetSize are the pool's layout when it was formatted: a drive
	// that disagrees with its peers is refused at start-up.
	Sets    int `json:"sets"`
	SetSize int `json:"setSize"`
	// Parity is the pool's parity per set; objects are encoded with it.
	Parity int `json:"parity"`
}

type formatFile struct {
	Magic          string `json:"magic"`
	Version        int    `json:"version"`
	MinReadVersion int    `json:"minReadVersion"`
	Format
}

// EncodeFormat renders f as the content of a format file.
func EncodeFormat(f Format) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return json.MarshalIndent(formatFile{
		Magic: FormatMagic, Version: FormatVersion, MinReadVersion: FormatMinReadVersion, Format: f,
	}, "", "  ")
}

// DecodeFormat parses a format file, refusing other files, versions this
// build cannot read, and inconsistent fields.
func DecodeFormat(data []byte) (Format, error) {
	var ff formatFile
	if err := json.Unmarshal(data, &ff); err != nil {
		return Format{}, fmt.Errorf("format file is not valid JSON: %w", err)
	}
	if ff.Magic != FormatMagic {
		return Format{}, fmt.Errorf("not a strata drive format file (magic %q)", ff.Magic)
	}
	if ff.Version < FormatMinReadVersion {
		return Format{}, fmt.Errorf("drive format version %d is older than this build reads (%d)", ff.Version, FormatMinReadVersion)
	}
	if ff.MinReadVersion > FormatVersion {
		return Format{}, fmt.Errorf("drive was formatted by a newer strata (format %d, needs a reader of at least %d; this build reads up to %d)",
			ff.Version, ff.MinReadVersion, FormatVersion)
	}
	if err := ff.Validate(); err != nil {
		return Format{}, err
	}
	return ff.Format, nil
}

// Validate checks that a format's fields are consistent.
func (f Format) Validate() error {
	switch {
	case f.DeploymentID == uuid.Nil:
		return errors.New("format: empty deployment ID")
	case f.DriveID == uuid.Nil:
		return errors.New("format: empty drive ID")
	case f.Pool < 0 || f.Set < 0 || f.Index < 0:
		return fmt.Errorf("format: negative position (pool %d, set %d, index %d)", f.Pool, f.Set, f.Index)
	case f.SetSize < 2 || f.SetSize > MaxSetSize:
		return fmt.Errorf("format: set size %d outside 2..%d", f.SetSize, MaxSetSize)
	case f.Sets < 1 || f.Set >= f.Sets:
		return fmt.Errorf("format: set %d outside the pool's %d sets", f.Set, f.Sets)
	case f.Index >= f.SetSize:
		return fmt.Errorf("format: index %d outside a set of %d", f.Index, f.SetSize)
	case f.Parity < 1 || f.Parity > f.SetSize/2:
		return fmt.Errorf("format: parity %d outside 1..%d for a set of %d", f.Parity, f.SetSize/2, f.SetSize)
	}
	return nil
}

// MaxSetSize is the largest erasure set.
const MaxSetSize = 16
