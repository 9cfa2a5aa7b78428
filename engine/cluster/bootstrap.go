package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
)

// LocalPool is a pool whose drives are all on this node.
type LocalPool struct {
	Pool   *erasure.Pool
	Paths  []string       // drive directories by position
	Drives []*drive.Local // by position; nil when the drive could not open
	Format drive.Format   // the agreed format (of position 0's slot)
	// Fresh lists positions formatted into an existing deployment at this
	// start (new or wiped drives): their objects must be rebuilt.
	Fresh []int
	opts  drive.Options
	mu    sync.Mutex // guards Drives after start-up
}

// Drive returns the drive at a position (nil when offline).
func (lp *LocalPool) Drive(pos int) *drive.Local {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.Drives[pos]
}

// Close closes every drive.
func (lp *LocalPool) Close() error {
	lp.mu.Lock()
	defer lp.mu.Unlock()
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

	lp := &LocalPool{Paths: paths, Drives: make([]*drive.Local, len(paths)), opts: opts}
	formats := make([]*drive.Format, len(paths))
	for i, p := range paths {
		d, err := drive.OpenLocal(p, opts)
		if err != nil {
			log.Error("drive offline: cannot open", "drive", p, "err", err)
			continue
		}
		lp.Drives[i] = d
		if d.StoreRecreated {
			lp.Fresh = append(lp.Fresh, i)
		}
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
			lp.Fresh = append(lp.Fresh, i)
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

// Reopen opens the drive at a position again (it went offline, or was
// wiped while the server ran) and puts it back into its set. An empty
// drive is formatted into its slot; fresh reports that its objects must
// be rebuilt. A drive holding another deployment's or slot's format is
// refused.
func (lp *LocalPool) Reopen(pos int) (fresh bool, err error) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	setSize := lp.Format.SetSize
	set := lp.Pool.Sets()[pos/setSize]
	if old := lp.Drives[pos]; old != nil {
		set.SetDrive(pos%setSize, nil)
		_ = old.Close()
		lp.Drives[pos] = nil
	}
	d, err := drive.OpenLocal(lp.Paths[pos], lp.opts)
	if err != nil {
		return false, err
	}
	f, err := d.Format()
	switch {
	case errors.Is(err, drive.ErrUnformatted):
		f = drive.Format{
			DeploymentID: lp.Format.DeploymentID, Pool: lp.Format.Pool, Set: pos / setSize, Index: pos % setSize,
			DriveID: uuid.New(), Sets: lp.Format.Sets, SetSize: setSize, Parity: lp.Format.Parity,
		}
		if err := d.WriteFormat(f); err != nil {
			_ = d.Close()
			return false, err
		}
		fresh = true
	case err != nil:
		_ = d.Close()
		return false, err
	default:
		fresh = d.StoreRecreated
		if err := checkSlot(lp.Paths[pos], f, lp.Format, pos, lp.Format.Sets, setSize, lp.Format.Parity); err != nil {
			_ = d.Close()
			return false, err
		}
	}
	lp.Drives[pos] = d
	set.SetDrive(pos%setSize, d)
	return fresh, nil
}
