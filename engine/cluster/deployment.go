package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
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
	// DriveOpenDelay is waited before each of this node's drives is
	// opened: a test seam (STRATA_TEST_DRIVE_OPEN_DELAY) that widens a
	// node's start-up, as a slow disk or a metadata store with a long
	// journal to replay would.
	DriveOpenDelay time.Duration
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
	opened []*PoolRuntime // by Open, until Bootstrap builds them
	peers  map[string]*internode.Peer
	locals map[string]*drive.Local  // by path, for the internode server
	hosts  atomic.Pointer[[]string] // this node's names (LocalHosts)
}

// PoolRuntime is one pool as this node runs it.
type PoolRuntime struct {
	Layout PoolLayout
	Entry  *erasure.PoolEntry
	dep    *Deployment
	index  int // in the topology
	mu     sync.Mutex
	local  map[int]*drive.Local // slot -> this node's drive (nil: offline)
	// drives are the slots' drives between openPool and buildPool.
	drives []erasure.Drive
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

// PoolPeers returns the clients of the other nodes that serve drives of
// the pools this node runs now: the nodes a read may go through. Nodes of
// a decommissioned pool are left out (their pods go with the pool).
func (d *Deployment) PoolPeers() []*internode.Peer {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*internode.Peer
	seen := map[string]bool{}
	for _, pr := range d.pools {
		if pr.Entry.State() == erasure.StateDecommissioned {
			continue
		}
		for _, host := range pr.Layout.Hosts() {
			if p, ok := d.peers[host]; ok && !seen[host] {
				seen[host] = true
				out = append(out, p)
			}
		}
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
	locals := make([]*drive.Local, 0, len(d.locals))
	for _, l := range d.locals {
		locals = append(locals, l)
	}
	peers := make([]*internode.Peer, 0, len(d.peers))
	for _, p := range d.peers {
		peers = append(peers, p)
	}
	d.mu.Unlock()
	// In parallel and not under the lock: each waits for the calls still
	// using its store (up to 10 s).
	errs := make([]error, len(locals))
	var wg sync.WaitGroup
	for i, l := range locals {
		wg.Go(func() { errs[i] = l.Close() })
	}
	wg.Wait()
	for _, p := range peers {
		p.Close()
	}
	return errors.Join(errs...)
}

// Open resolves every pool of the topology and opens this node's drives,
// which the internode service then serves (LocalDrive): it runs before that
// service answers anyone, so a starting node never tells a peer that it
// does not serve a drive it is about to serve. A drive that does not open
// stays offline (the drive monitor retries it). Bootstrap follows.
func (d *Deployment) Open(t Topology) error {
	if t.DeploymentID != "" {
		d.ID = uuid.MustParse(t.DeploymentID)
	}
	for i, spec := range t.Pools {
		pr, err := d.openPool(spec, i)
		if err != nil {
			d.mu.Lock()
			opened := d.opened
			d.opened = nil
			d.mu.Unlock()
			for _, o := range opened {
				o.closeLocal()
			}
			return err
		}
		d.mu.Lock()
		d.opened = append(d.opened, pr)
		d.mu.Unlock()
	}
	return nil
}

// Bootstrap brings up the pools Open opened, waiting for peers as long as
// the deployment cannot yet agree on its identity.
func (d *Deployment) Bootstrap(ctx context.Context) error {
	d.mu.Lock()
	opened := d.opened
	d.opened = nil
	d.mu.Unlock()
	var entries []*erasure.PoolEntry
	for _, pr := range opened {
		if err := d.buildPool(ctx, pr); err != nil {
			return err
		}
		d.mu.Lock()
		d.pools = append(d.pools, pr)
		d.mu.Unlock()
		entries = append(entries, pr.Entry)
	}
	d.Pools = erasure.NewPools(entries...)
	if len(entries) > 1 {
		go d.copyBuckets(ctx)
	}
	return nil
}

// AddPool brings up a pool appended to the topology while running.
func (d *Deployment) AddPool(ctx context.Context, spec PoolSpec, index int) (*PoolRuntime, error) {
	pr, err := d.openPool(spec, index)
	if err != nil {
		return nil, err
	}
	if err := d.buildPool(ctx, pr); err != nil {
		return nil, err
	}
	// In the namespace before in the pools this node reports: a peer told
	// this node knows the pool may place objects there at once.
	d.Pools.Add(pr.Entry)
	d.mu.Lock()
	d.pools = append(d.pools, pr)
	d.mu.Unlock()
	go d.copyBuckets(ctx)
	return pr, nil
}

// copyBuckets copies the first pool's bucket records to the pools that
// miss them (a pool added to the topology), trying again (from 1 s,
// doubling up to 30 s) while a pool does not answer, its servers still
// starting, until ctx ends. Every node of the deployment does so at its
// start and when it adds a pool: a pool without a bucket's record stores
// objects, but refuses changes to the bucket.
func (d *Deployment) copyBuckets(ctx context.Context) {
	wait := time.Second
	for {
		err := d.Pools.HealBuckets(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		d.opts.Log.Warn("bucket records not yet copied to every pool; trying again", "retryIn", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// PoolNames lists the pools this node reads and writes, which its pings
// report to its peers.
func (d *Deployment) PoolNames() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.pools))
	for _, p := range d.pools {
		out = append(out, p.Layout.Name)
	}
	return out
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

// ServedDrives lists the paths of the drives this node serves now (open),
// which its pings report to its peers.
func (d *Deployment) ServedDrives() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.locals))
	for path, l := range d.locals {
		if l.Online() { // a failed metadata store is served no more
			out = append(out, path)
		}
	}
	return out
}

// LocalHosts lists the names this node has in the topology (the hosts of
// its drives' endpoints), for every internode request it answers; the
// slice is shared, not to be changed.
func (d *Deployment) LocalHosts() []string {
	if h := d.hosts.Load(); h != nil {
		return *h
	}
	return nil
}

// addLocalHosts records this node's names in a pool's layout.
func (d *Deployment) addLocalHosts(l PoolLayout) {
	d.mu.Lock()
	defer d.mu.Unlock()
	hosts := d.LocalHosts()
	for _, ep := range l.Drives {
		if ep.Local && ep.Host != "" && !slices.Contains(hosts, ep.Host) {
			hosts = append(slices.Clip(hosts), ep.Host)
		}
	}
	d.hosts.Store(&hosts)
}

// Peer returns the client of the node known by host in the topology (nil
// when none).
func (d *Deployment) Peer(host string) *internode.Peer {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peers[host]
}

// slotState is what one drive says about its format.
type slotState struct {
	format *drive.Format
	err    error // ErrUnformatted, or why it did not answer
}

// openPool resolves a pool's layout and opens this node's drives of it
// (served from then on); the others are reached through their nodes.
func (d *Deployment) openPool(spec PoolSpec, index int) (*PoolRuntime, error) {
	layout, err := spec.Layout(d.opts.Locality)
	if err != nil {
		return nil, err
	}
	d.addLocalHosts(layout)
	pr := &PoolRuntime{Layout: layout, dep: d, index: index, local: map[int]*drive.Local{}, drives: make([]erasure.Drive, len(layout.Drives))}
	for slot, ep := range layout.Drives {
		if ep.Local {
			time.Sleep(d.opts.DriveOpenDelay)
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
			pr.drives[slot] = l
			continue
		}
		p, err := d.peer(ep.Host)
		if err != nil {
			pr.closeLocal()
			return nil, err
		}
		pr.drives[slot] = p.Drive(ep.Path)
	}
	return pr, nil
}

// buildPool agrees on an opened pool's format with its other nodes and
// builds its sets.
func (d *Deployment) buildPool(ctx context.Context, pr *PoolRuntime) error {
	layout, drives := pr.Layout, pr.drives
	pr.drives = nil
	if err := d.agree(ctx, pr, drives, pr.index); err != nil {
		pr.closeLocal()
		return err
	}
	var sets []*erasure.Set
	for s := 0; s < layout.Sets; s++ {
		set, err := erasure.NewSet(drives[s*layout.SetSize:(s+1)*layout.SetSize], layout.Parity)
		if err != nil {
			return err
		}
		sets = append(sets, set)
	}
	pool, err := erasure.NewPool(d.ID, sets)
	if err != nil {
		return err
	}
	pr.Entry = erasure.NewPoolEntry(layout.Name, pool, layout.State)
	d.opts.Log.Info("pool ready", "pool", layout.String(), "deployment", d.ID, "localDrives", len(pr.local), "fresh", len(pr.Fresh))
	return nil
}

func (pr *PoolRuntime) closeLocal() {
	for slot, l := range pr.local {
		if l != nil {
			pr.dep.unregister(pr.Layout.Drives[slot].Path, l)
			_ = l.Close()
		}
	}
}

// unregister stops serving a local drive that is being closed (unless
// another one was registered at its path since).
func (d *Deployment) unregister(path string, l *drive.Local) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.locals[path] == l {
		delete(d.locals, path)
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
					d.unregister(layout.Drives[slot].Path, l)
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

// TakeOffline takes this node's drive at a slot out of its set and closes
// it (its metadata store failed); Reopen brings it back.
func (pr *PoolRuntime) TakeOffline(slot int) error {
	pr.mu.Lock()
	old := pr.local[slot]
	if old == nil {
		pr.mu.Unlock()
		return nil
	}
	l := pr.Layout
	pr.Entry.Pool.Sets()[slot/l.SetSize].SetDrive(slot%l.SetSize, nil)
	pr.dep.unregister(l.Drives[slot].Path, old)
	pr.local[slot] = nil
	pr.mu.Unlock()
	return old.Close() // not under the lock: a failed store may be slow to close
}

// Reopen opens this node's drive at a slot again (it went offline, or was
// wiped while running) and puts it back into its set. An empty drive is
// formatted into its slot; fresh reports that its objects must be rebuilt.
// The drive is opened without holding the runtime's lock: opening a store
// replays its log, which a slow disk makes slow. Only the drive monitor
// calls it.
func (pr *PoolRuntime) Reopen(ctx context.Context, slot int) (fresh bool, err error) {
	if err := pr.TakeOffline(slot); err != nil {
		pr.dep.opts.Log.Warn("closing a drive to reopen it", "drive", pr.Layout.Drives[slot].Path, "err", err)
	}
	l := pr.Layout
	ep := l.Drives[slot]
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
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.local[slot] = d
	pr.dep.mu.Lock()
	pr.dep.locals[ep.Path] = d
	pr.dep.mu.Unlock()
	pr.Entry.Pool.Sets()[slot/l.SetSize].SetDrive(slot%l.SetSize, d)
	return fresh, nil
}

// Online reports whether a slot's drive can be used: a local drive that is
// open and whose metadata store has not failed, or a remote one whose node answers and says it serves it.
func (pr *PoolRuntime) Online(slot int) bool {
	l := pr.Layout
	d := pr.Entry.Pool.Sets()[slot/l.SetSize].Drives()[slot%l.SetSize]
	switch x := d.(type) {
	case nil:
		return false
	case *internode.RemoteDrive:
		return x.Online()
	case *drive.Local:
		return x.Online()
	}
	return true
}
