package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/internode"
)

// Options bring a deployment up on this node.
type Options struct {
	Locality      Locality
	InternodePort int
	Drive         drive.Options
	Peer          internode.PeerOptions
	Log           *slog.Logger
}

// Deployment is this node's view of every pool: its own drives opened
// locally, the others reached through their nodes.
type Deployment struct {
	opts Options
	// ID is the deployment ID every drive carries.
	ID    uuid.UUID
	Pools *erasure.Pools

	mu     sync.Mutex
	pools  []*PoolRuntime
	peers  map[string]*internode.Peer
	locals map[string]*drive.Local // by path, for the internode server
}

// PoolRuntime is one pool as this node runs it.
type PoolRuntime struct {
	Layout PoolLayout
	Entry  *erasure.PoolEntry
	dep    *Deployment
	mu     sync.Mutex
	local  map[int]*drive.Local // slot -> this node's drive (nil: offline)
	// Fresh are this node's slots formatted into an existing pool at
	// start-up (new or wiped drives): their objects must be rebuilt.
	Fresh []int
}

// NewDeployment prepares an empty deployment; Bootstrap fills it.
func NewDeployment(opts Options) *Deployment {
	return &Deployment{opts: opts, peers: map[string]*internode.Peer{}, locals: map[string]*drive.Local{}}
}

// LocalDrive returns this node's drive at path (the internode server's
// lookup).
func (d *Deployment) LocalDrive(path string) *drive.Local {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.locals[path]
}

// Peers returns the clients of the other nodes.
func (d *Deployment) Peers() []*internode.Peer {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*internode.Peer, 0, len(d.peers))
	for _, p := range d.peers {
		out = append(out, p)
	}
	return out
}

// PoolRuntimes returns the pools in topology order.
func (d *Deployment) PoolRuntimes() []*PoolRuntime {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*PoolRuntime(nil), d.pools...)
}

func (d *Deployment) peer(host string) (*internode.Peer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.peers[host]; ok {
		return p, nil
	}
	p, err := internode.NewPeer(host, d.opts.InternodePort, d.opts.Peer)
	if err != nil {
		return nil, err
	}
	d.peers[host] = p
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = p.Ping(ctx) // learns the peer's protocol; marks it offline if down
	}()
	return p, nil
}

// Close closes this node's drives and stops the peers' pings.
func (d *Deployment) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, l := range d.locals {
		errs = append(errs, l.Close())
	}
	for _, p := range d.peers {
		p.Close()
	}
	return errors.Join(errs...)
}

// Bootstrap brings up every pool of the topology, waiting for peers as
// long as the deployment cannot yet agree on its identity.
func (d *Deployment) Bootstrap(ctx context.Context, t Topology) error {
	if t.DeploymentID != "" {
		d.ID = uuid.MustParse(t.DeploymentID)
	}
	var entries []*erasure.PoolEntry
	for i, spec := range t.Pools {
		pr, err := d.setupPool(ctx, spec, i)
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.pools = append(d.pools, pr)
		d.mu.Unlock()
		entries = append(entries, pr.Entry)
	}
	d.Pools = erasure.NewPools(entries...)
	return nil
}

// AddPool brings up a pool appended to the topology while running.
func (d *Deployment) AddPool(ctx context.Context, spec PoolSpec, index int) (*PoolRuntime, error) {
	pr, err := d.setupPool(ctx, spec, index)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.pools = append(d.pools, pr)
	d.mu.Unlock()
	d.Pools.Add(pr.Entry)
	if err := d.Pools.HealBuckets(ctx); err != nil {
		d.opts.Log.Warn("buckets not yet copied to the new pool", "pool", spec.Name, "err", err)
	}
	return pr, nil
}

// RemovePool takes a decommissioned pool out of the deployment: out of the
// namespace and out of the pools this node reports and checks. Its local
// drives stay open (a request or a peer call in flight may still read
// them; their pods go with the pool) and are released at the next start.
func (d *Deployment) RemovePool(name string) {
	d.Pools.Remove(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, p := range d.pools {
		if p.Layout.Name == name {
			d.pools = append(d.pools[:i:i], d.pools[i+1:]...)
			return
		}
	}
}

// slotState is what one drive says about its format.
type slotState struct {
	format *drive.Format
	err    error // ErrUnformatted, or why it did not answer
}

// setupPool opens this node's drives of a pool, agrees on the format with
// the pool's other nodes and builds its sets.
func (d *Deployment) setupPool(ctx context.Context, spec PoolSpec, index int) (*PoolRuntime, error) {
	layout, err := spec.Layout(d.opts.Locality)
	if err != nil {
		return nil, err
	}
	pr := &PoolRuntime{Layout: layout, dep: d, local: map[int]*drive.Local{}}
	drives := make([]erasure.Drive, len(layout.Drives))
	for slot, ep := range layout.Drives {
		if ep.Local {
			l, err := drive.OpenLocal(ep.Path, d.opts.Drive)
			if err != nil {
				d.opts.Log.Error("drive offline: cannot open", "drive", ep.Path, "err", err)
				continue
			}
			pr.local[slot] = l
			if l.StoreRecreated {
				pr.Fresh = append(pr.Fresh, slot)
			}
			d.mu.Lock()
			d.locals[ep.Path] = l
			d.mu.Unlock()
			drives[slot] = l
			continue
		}
		p, err := d.peer(ep.Host)
		if err != nil {
			return nil, err
		}
		drives[slot] = p.Drive(ep.Path)
	}
	if err := d.agree(ctx, pr, drives, index); err != nil {
		pr.closeLocal()
		return nil, err
	}
	var sets []*erasure.Set
	for s := 0; s < layout.Sets; s++ {
		set, err := erasure.NewSet(drives[s*layout.SetSize:(s+1)*layout.SetSize], layout.Parity)
		if err != nil {
			return nil, err
		}
		sets = append(sets, set)
	}
	pool, err := erasure.NewPool(d.ID, sets)
	if err != nil {
		return nil, err
	}
	pr.Entry = erasure.NewPoolEntry(layout.Name, pool, layout.State)
	d.opts.Log.Info("pool ready", "pool", layout.String(), "deployment", d.ID, "localDrives", len(pr.local), "fresh", len(pr.Fresh))
	return pr, nil
}

func (pr *PoolRuntime) closeLocal() {
	for _, l := range pr.local {
		_ = l.Close()
	}
}

// agree settles the deployment ID and checks every drive's format against
// its slot, formatting this node's empty drives. It waits while the
// deployment ID cannot be known yet (a new deployment whose first node is
// not up). Its length is the retry loop around one decision made from all
// drives at once (read formats, settle the ID, check, format); the steps
// share the formats read and are kept together so the decision is visible.
func (d *Deployment) agree(ctx context.Context, pr *PoolRuntime, drives []erasure.Drive, index int) error {
	layout := pr.Layout
	lastLog := time.Time{}
	for {
		states := make([]slotState, len(drives))
		var wg sync.WaitGroup
		for slot, dr := range drives {
			if dr == nil {
				states[slot].err = errors.New("offline")
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				f, err := dr.Format(ctx)
				if err == nil {
					states[slot].format = &f
				} else {
					states[slot].err = err
				}
			}()
		}
		wg.Wait()
		answered, formatted := 0, 0
		var ids []uuid.UUID
		for slot, st := range states {
			switch {
			case st.format != nil:
				answered++
				formatted++
				if !containsID(ids, st.format.DeploymentID) {
					ids = append(ids, st.format.DeploymentID)
				}
				if err := checkSlotFormat(layout, slot, *st.format); err != nil {
					return err
				}
			case errors.Is(st.err, drive.ErrUnformatted):
				answered++
			}
		}
		if len(ids) > 1 {
			return fmt.Errorf("pool %s: its drives belong to different deployments (%v): wrong disks mounted?", layout.Name, ids)
		}
		if len(ids) == 1 {
			if d.ID != uuid.Nil && d.ID != ids[0] {
				return fmt.Errorf("pool %s: drives belong to deployment %s, the deployment is %s: wrong disks mounted?", layout.Name, ids[0], d.ID)
			}
			d.ID = ids[0]
		}
		if d.ID == uuid.Nil && layout.Drives[0].Local && answered == len(drives) {
			d.ID = uuid.New() // a new deployment: this node holds its first drive
			d.opts.Log.Info("new deployment", "deployment", d.ID)
		}
		if d.ID != uuid.Nil {
			for slot, l := range pr.local {
				if states[slot].format != nil || !errors.Is(states[slot].err, drive.ErrUnformatted) {
					continue
				}
				f := drive.Format{
					DeploymentID: d.ID, Pool: index, PoolName: layout.Name, Set: slot / layout.SetSize, Index: slot % layout.SetSize,
					DriveID: uuid.New(), Sets: layout.Sets, SetSize: layout.SetSize, Parity: layout.Parity,
				}
				if err := l.WriteFormat(f); err != nil {
					d.opts.Log.Error("drive offline: cannot format", "drive", l.Root(), "err", err)
					_ = l.Close()
					pr.local[slot] = nil
					drives[slot] = nil
					continue
				}
				if formatted > 0 {
					pr.Fresh = append(pr.Fresh, slot)
					d.opts.Log.Warn("formatted an empty drive into its slot; its objects are rebuilt by healing", "drive", l.Root(), "set", f.Set, "index", f.Index)
				}
			}
			return nil
		}
		if time.Since(lastLog) > 5*time.Second {
			d.opts.Log.Info("waiting for the pool's first node to start the deployment", "pool", layout.Name,
				"first", layout.Drives[0].Raw, "answered", answered, "drives", len(drives))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func containsID(ids []uuid.UUID, id uuid.UUID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// checkSlotFormat refuses a drive whose format disagrees with its slot,
// naming what differs.
func checkSlotFormat(l PoolLayout, slot int, f drive.Format) error {
	ep := l.Drives[slot].Raw
	switch {
	case f.PoolName != "" && f.PoolName != l.Name:
		return fmt.Errorf("drive %s belongs to pool %q, the topology puts it in pool %q", ep, f.PoolName, l.Name)
	case f.Sets != l.Sets || f.SetSize != l.SetSize:
		return fmt.Errorf("drive %s was formatted as %d sets of %d drives; pool %s now has %d sets of %d", ep, f.Sets, f.SetSize, l.Name, l.Sets, l.SetSize)
	case f.Parity != l.Parity:
		return fmt.Errorf("drive %s was formatted with parity %d, pool %s asks for %d: parity cannot change after formatting", ep, f.Parity, l.Name, l.Parity)
	case f.Set != slot/l.SetSize || f.Index != slot%l.SetSize:
		return fmt.Errorf("drive %s holds slot set %d index %d but is at set %d index %d of pool %s: drives reordered?", ep, f.Set, f.Index, slot/l.SetSize, slot%l.SetSize, l.Name)
	}
	return nil
}

// LocalSlots returns this node's slots of the pool.
func (pr *PoolRuntime) LocalSlots() []int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []int
	for slot := range pr.Layout.Drives {
		if pr.Layout.Drives[slot].Local {
			out = append(out, slot)
		}
	}
	return out
}

// Local returns this node's drive at a slot (nil: offline or not local).
func (pr *PoolRuntime) Local(slot int) *drive.Local {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.local[slot]
}

// Reopen opens this node's drive at a slot again (it went offline, or was
// wiped while running) and puts it back into its set. An empty drive is
// formatted into its slot; fresh reports that its objects must be rebuilt.
func (pr *PoolRuntime) Reopen(ctx context.Context, slot int) (fresh bool, err error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	l := pr.Layout
	ep := l.Drives[slot]
	set := pr.Entry.Pool.Sets()[slot/l.SetSize]
	if old := pr.local[slot]; old != nil {
		set.SetDrive(slot%l.SetSize, nil)
		_ = old.Close()
		pr.local[slot] = nil
	}
	d, err := drive.OpenLocal(ep.Path, pr.dep.opts.Drive)
	if err != nil {
		return false, err
	}
	f, err := d.Format(ctx)
	switch {
	case errors.Is(err, drive.ErrUnformatted):
		f = drive.Format{
			DeploymentID: pr.dep.ID, PoolName: l.Name, Set: slot / l.SetSize, Index: slot % l.SetSize,
			DriveID: uuid.New(), Sets: l.Sets, SetSize: l.SetSize, Parity: l.Parity,
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
		if f.DeploymentID != pr.dep.ID {
			_ = d.Close()
			return false, fmt.Errorf("drive %s belongs to deployment %s, not %s: wrong disk mounted?", ep.Path, f.DeploymentID, pr.dep.ID)
		}
		if err := checkSlotFormat(l, slot, f); err != nil {
			_ = d.Close()
			return false, err
		}
		fresh = d.StoreRecreated
	}
	pr.local[slot] = d
	pr.dep.mu.Lock()
	pr.dep.locals[ep.Path] = d
	pr.dep.mu.Unlock()
	set.SetDrive(slot%l.SetSize, d)
	return fresh, nil
}

// Online reports whether a slot's drive can be used: a local drive that is
// open, or a remote one whose node answers.
func (pr *PoolRuntime) Online(slot int) bool {
	l := pr.Layout
	d := pr.Entry.Pool.Sets()[slot/l.SetSize].Drives()[slot%l.SetSize]
	switch x := d.(type) {
	case nil:
		return false
	case *internode.RemoteDrive:
		return x.Peer().Online()
	}
	return true
}
