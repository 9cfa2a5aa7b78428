package cluster

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
)

// LocalPool is a pool whose drives are all on this node.
type LocalPool struct {
	Pool   *erasure.Pool
	Drives []*drive.Local // by position; nil when the drive could not open
	Format drive.Format   // the agreed format (of position 0's slot)
}

// Close closes every drive.
func (lp *LocalPool) Close() error {
	var errs []error
	for _, d := range lp.Drives {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	return errors.Join(errs...)
}

// OpenLocalPool opens the drives at paths (in argument order), agrees on
// their format and returns the pool. Drive i sits at set i/setSize, index
// i%setSize. All drives new: a deployment is created. Some formatted: the
// formatted ones must agree (deployment, layout, their slot), and new or
// wiped drives are formatted into their slots (their data is rebuilt by
// healing). parity 0 uses the default for the set size.
func OpenLocalPool(paths []string, parity int, opts drive.Options, log *slog.Logger) (*LocalPool, error) {
	setSize, err := erasure.SetSize(len(paths), 1)
	if err != nil {
		return nil, err
	}
	if parity == 0 {
		parity = erasure.DefaultParity(setSize)
	}
	if _, err := erasure.NewLayout(setSize, parity); err != nil {
		return nil, err
	}
	sets := len(paths) / setSize

	lp := &LocalPool{Drives: make([]*drive.Local, len(paths))}
	formats := make([]*drive.Format, len(paths))
	for i, p := range paths {
		d, err := drive.OpenLocal(p, opts)
		if err != nil {
			log.Error("drive offline: cannot open", "drive", p, "err", err)
			continue
		}
		lp.Drives[i] = d
		f, err := d.Format()
		if errors.Is(err, drive.ErrUnformatted) {
			continue
		}
		if err != nil {
			_ = lp.Close()
			return nil, err
		}
		formats[i] = &f
	}

	var agreed *drive.Format
	for i, f := range formats {
		if f == nil {
			continue
		}
		if agreed == nil {
			agreed = f
		}
		if err := checkSlot(paths[i], *f, *agreed, i, sets, setSize, parity); err != nil {
			_ = lp.Close()
			return nil, err
		}
	}
	deployment := uuid.New()
	if agreed != nil {
		deployment = agreed.DeploymentID
	}
	for i, d := range lp.Drives {
		if d == nil || formats[i] != nil {
			continue
		}
		f := drive.Format{
			DeploymentID: deployment, Pool: 0, Set: i / setSize, Index: i % setSize,
			DriveID: uuid.New(), Sets: sets, SetSize: setSize, Parity: parity,
		}
		if err := d.WriteFormat(f); err != nil {
			log.Error("drive offline: cannot format", "drive", paths[i], "err", err)
			_ = d.Close()
			lp.Drives[i] = nil
			continue
		}
		if agreed != nil {
			log.Warn("formatted an empty drive into its slot; its objects are rebuilt by healing", "drive", paths[i], "set", f.Set, "index", f.Index)
		}
	}

	var ss []*erasure.Set
	for s := 0; s < sets; s++ {
		ds := make([]erasure.Drive, setSize)
		for i := range ds {
			if d := lp.Drives[s*setSize+i]; d != nil {
				ds[i] = d
			}
		}
		set, err := erasure.NewSet(ds, parity)
		if err != nil {
			_ = lp.Close()
			return nil, err
		}
		ss = append(ss, set)
	}
	if lp.Pool, err = erasure.NewPool(deployment, ss); err != nil {
		_ = lp.Close()
		return nil, err
	}
	lp.Format = drive.Format{DeploymentID: deployment, Sets: sets, SetSize: setSize, Parity: parity}
	return lp, nil
}

// checkSlot refuses a drive whose format disagrees with the others or with
// its position, naming what differs.
func checkSlot(path string, f, agreed drive.Format, pos, sets, setSize, parity int) error {
	switch {
	case f.DeploymentID != agreed.DeploymentID:
		return fmt.Errorf("drive %s belongs to deployment %s, other drives to %s: wrong disk mounted?", path, f.DeploymentID, agreed.DeploymentID)
	case f.Sets != sets || f.SetSize != setSize:
		return fmt.Errorf("drive %s was formatted as %d sets of %d drives; the %d drives given make %d sets of %d", path, f.Sets, f.SetSize, sets*setSize, sets, setSize)
	case f.Parity != parity:
		return fmt.Errorf("drive %s was formatted with parity %d, asked for %d: parity cannot change after formatting", path, f.Parity, parity)
	case f.Set != pos/setSize || f.Index != pos%setSize:
		return fmt.Errorf("drive %s holds slot set %d index %d but was given at position %d (set %d index %d): drives reordered?", path, f.Set, f.Index, pos, pos/setSize, pos%setSize)
	}
	return nil
}
