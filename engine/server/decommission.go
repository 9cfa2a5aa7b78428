package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/strata-storage/strata/engine/admin"
	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/cluster"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Decommission runs on the nodes that lead the draining pool's sets (the
// node of each set's first drive). A pool drains when the topology file
// says Draining or when an admin started it (an override every node keeps
// on its drives of that pool, so it survives restarts); it is
// Decommissioned once every set is empty.

type drainKey struct {
	pool string
	set  int
}

type drainState struct {
	cancel context.CancelFunc
	marker erasure.DrainMarker
	err    string
}

// drainEntry reports one set's drain.
type drainEntry struct {
	Set    int                 `json:"set"`
	Marker erasure.DrainMarker `json:"marker"`
	Error  string              `json:"error,omitempty"`
}

// overrideFile and drainFile live in the .strata directory of this node's
// drives of the pool.
const overrideFile = "pool-state.json"

func drainFile(set int) string { return fmt.Sprintf("drain-set%d.json", set) }

func stateDir(pr *cluster.PoolRuntime, slot int) string {
	return filepath.Join(pr.Layout.Drives[slot].Path, ".strata")
}

// readJSONFile reads the first of this node's drives of a pool holding name.
func readJSONFile(pr *cluster.PoolRuntime, slots []int, name string, v any) bool {
	for _, slot := range slots {
		if b, err := os.ReadFile(filepath.Join(stateDir(pr, slot), name)); err == nil && json.Unmarshal(b, v) == nil {
			return true
		}
	}
	return false
}

// writeJSONFile writes name on each of slots' drives (atomically).
func writeJSONFile(pr *cluster.PoolRuntime, slots []int, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var errs []error
	for _, slot := range slots {
		dir := stateDir(pr, slot)
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.Rename(tmp, filepath.Join(dir, name)))
	}
	return errors.Join(errs...)
}

// applyOverride sets a pool's state from this node's persisted override,
// if any.
func applyOverride(pr *cluster.PoolRuntime) {
	var o struct{ State string }
	if readJSONFile(pr, pr.LocalSlots(), overrideFile, &o) && o.State != "" {
		pr.Entry.SetState(o.State)
	}
}

// SetPoolState implements internode.NodeHooks: it applies a pool's state
// on this node, persisted as an override (an admin's decommission) or not
// (the topology's state, told by a drain's leader before this node's copy
// of the topology says it). A pool that becomes Draining answers once the
// writes this node placed in it have finished (up to drainSettle).
func (n *Node) SetPoolState(pool, state string, persist bool) error {
	switch state {
	case erasure.StateActive, erasure.StateDraining, erasure.StateDecommissioned:
	default:
		return fmt.Errorf("pool state %q is not Active, Draining or Decommissioned", state)
	}
	pr := n.poolRuntime(pool)
	if pr == nil {
		// It places nothing in a pool it does not run; the pool comes up
		// in this state if its topology lists it so.
		n.mu.Lock()
		if n.told == nil {
			n.told = map[string]string{}
		}
		n.told[pool] = state
		n.mu.Unlock()
		n.cfg.Log.Info("pool state noted for a pool this node does not run yet", "pool", pool, "state", state)
		return nil
	}
	switch {
	case persist:
		if err := writeJSONFile(pr, pr.LocalSlots(), overrideFile, map[string]string{"State": state}); err != nil {
			return err
		}
		pr.Entry.SetState(state)
		n.cfg.Log.Info("pool state changed", "pool", pool, "state", state)
	case pr.Entry.State() == erasure.StateDecommissioned:
		return nil // for good
	case pr.Entry.State() != state:
		pr.Entry.SetState(state)
		n.cfg.Log.Info("pool state from the topology, told by a peer", "pool", pool, "state", state)
	}
	if state != erasure.StateDraining {
		return nil
	}
	deadline := time.Now().Add(drainSettle)
	for pr.Entry.WritesInFlight() > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d writes placed in pool %s before it was draining still run", pr.Entry.WritesInFlight(), pool)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// drainSettle bounds how long SetPoolState waits for the writes placed in
// a pool that becomes Draining (the caller asks again).
const drainSettle = 5 * time.Second

func (n *Node) poolRuntime(name string) *cluster.PoolRuntime {
	for _, pr := range n.dep.PoolRuntimes() {
		if pr.Layout.Name == name {
			return pr
		}
	}
	return nil
}

// setPoolStateEverywhere applies a pool state on every node (this one
// included); nodes that are down learn it from the topology or from their
// peers when they return.
func (n *Node) setPoolStateEverywhere(ctx context.Context, pool, state string) error {
	return n.poolStateEverywhere(ctx, pool, state, true)
}

// poolStateEverywhere is setPoolStateEverywhere, persisted or not
// (NodeHooks.SetPoolState).
func (n *Node) poolStateEverywhere(ctx context.Context, pool, state string, persist bool) error {
	if err := n.SetPoolState(pool, state, persist); err != nil {
		return err
	}
	var errs []error
	for _, p := range n.dep.Peers() {
		if err := p.SetPoolState(ctx, pool, state, persist); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", p.Host, err))
		}
	}
	return errors.Join(errs...)
}

// runDecommissions starts and stops the drains of the sets this node
// leads, following the pools' states. Before a drain starts, every node is
// told the pool is draining (not persisted: it is the topology's state, or
// an admin's already persisted) and answers once the writes it placed
// there have finished: nodes load the topology each at its own time (a
// kubelet's pod sync), and a node that still took the pool for active
// placed objects in a set after its drain had passed them; the pool was
// then called empty and the objects lost with it (2026-11-28, the day-2
// test on real kubelets). A node that does not answer holds the drain
// back until it does.
func (n *Node) runDecommissions(ctx context.Context) {
	told := map[string]bool{}
	warned := map[string]time.Time{}
	tick(ctx, time.Second, func() {
		for _, pr := range n.dep.PoolRuntimes() {
			draining := pr.Entry.State() == erasure.StateDraining
			name := pr.Layout.Name
			if !draining {
				delete(told, name)
			} else if !told[name] && n.leadsAny(pr) {
				if err := n.poolStateEverywhere(ctx, name, erasure.StateDraining, false); err != nil {
					if time.Since(warned[name]) > 30*time.Second {
						warned[name] = time.Now()
						n.cfg.Log.Warn("drain waits until every node knows the pool is draining", "pool", name, "err", err)
					}
					continue
				}
				told[name] = true
			}
			for set := 0; set < pr.Layout.Sets; set++ {
				if !n.leads(pr, set) {
					continue
				}
				k := drainKey{pr.Layout.Name, set}
				n.mu.Lock()
				st := n.drains[k]
				n.mu.Unlock()
				switch {
				case draining && (st == nil || st.cancel == nil && !st.marker.Done):
					n.startDrain(ctx, pr, set)
				case !draining && st != nil && st.cancel != nil:
					st.cancel()
				}
			}
			if draining && n.leads(pr, 0) {
				n.completeIfDrained(ctx, pr)
			}
		}
	})
}

// leadsAny reports whether this node leads a set of the pool.
func (n *Node) leadsAny(pr *cluster.PoolRuntime) bool {
	for set := 0; set < pr.Layout.Sets; set++ {
		if n.leads(pr, set) {
			return true
		}
	}
	return false
}

// startDrain drains one set in the background from its saved marker.
func (n *Node) startDrain(ctx context.Context, pr *cluster.PoolRuntime, set int) {
	slot := set * pr.Layout.SetSize
	var marker erasure.DrainMarker
	readJSONFile(pr, []int{slot}, drainFile(set), &marker)
	if marker.Done {
		n.mu.Lock()
		n.drains[drainKey{pr.Layout.Name, set}] = &drainState{marker: marker}
		n.mu.Unlock()
		return
	}
	dctx, cancel := context.WithCancel(ctx)
	st := &drainState{cancel: cancel, marker: marker}
	k := drainKey{pr.Layout.Name, set}
	n.mu.Lock()
	n.drains[k] = st
	n.mu.Unlock()
	n.cfg.Log.Info("draining set", "pool", pr.Layout.Name, "set", set, "resumeAfter", marker.Bucket+"/"+marker.Object)
	go func() {
		final, err := n.dep.Pools.DrainSet(dctx, pr.Entry, set, marker, func(m erasure.DrainMarker) error {
			n.mu.Lock()
			st.marker = m
			n.mu.Unlock()
			return writeJSONFile(pr, []int{slot}, drainFile(set), m)
		})
		n.mu.Lock()
		st.cancel, st.marker = nil, final
		if err != nil && !errors.Is(err, context.Canceled) {
			st.err = err.Error()
			n.cfg.Log.Error("drain of a set stopped; retried shortly", "pool", pr.Layout.Name, "set", set, "err", err)
		}
		if err != nil {
			// Forget it so the next tick resumes from the saved marker.
			delete(n.drains, k)
		}
		n.mu.Unlock()
		if err == nil {
			n.cfg.Log.Info("set drained", "pool", pr.Layout.Name, "set", set, "objects", final.Objects, "bytes", final.Bytes)
		}
	}()
}

// localDrains reports the drains this node runs or ran.
func (n *Node) localDrains() map[string][]drainEntry {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string][]drainEntry{}
	for k, st := range n.drains {
		out[k.pool] = append(out[k.pool], drainEntry{Set: k.set, Marker: st.marker, Error: st.err})
	}
	return out
}

// DecommissionStatus implements admin.Node: every set's drain, gathered
// from the nodes that run them.
func (n *Node) DecommissionStatus(ctx context.Context, pool string) (adminapi.DecommissionStatus, error) {
	pr := n.poolRuntime(pool)
	if pr == nil {
		return adminapi.DecommissionStatus{}, fmt.Errorf("%w: %q", admin.ErrNoSuchPool, pool)
	}
	st := adminapi.DecommissionStatus{Pool: pool, State: pr.Entry.State()}
	bySet := map[int]drainEntry{}
	for _, e := range n.localDrains()[pool] {
		bySet[e.Set] = e
	}
	for _, rs := range n.remoteStatus(ctx) {
		for _, e := range rs.Drains[pool] {
			bySet[e.Set] = e
		}
	}
	st.Done = pr.Entry.State() == erasure.StateDecommissioned
	all := true
	for set := 0; set < pr.Layout.Sets; set++ {
		e, ok := bySet[set]
		ss := adminapi.SetDrain{Set: set, Node: pr.Layout.Drives[set*pr.Layout.SetSize].Host}
		if ok {
			ss.Objects, ss.Bytes, ss.Done, ss.Error = e.Marker.Objects, e.Marker.Bytes, e.Marker.Done, e.Error
		}
		all = all && ss.Done
		st.ObjectsMoved += ss.Objects
		st.BytesMoved += ss.Bytes
		st.Sets = append(st.Sets, ss)
	}
	sort.Slice(st.Sets, func(i, j int) bool { return st.Sets[i].Set < st.Sets[j].Set })
	st.Done = st.Done || all && pr.Entry.State() != erasure.StateActive
	return st, nil
}

// completeIfDrained marks a pool Decommissioned everywhere once every set
// is drained (run by the leader of its first set).
func (n *Node) completeIfDrained(ctx context.Context, pr *cluster.PoolRuntime) {
	st, err := n.DecommissionStatus(ctx, pr.Layout.Name)
	if err != nil || !st.Done {
		return
	}
	for _, s := range st.Sets {
		if !s.Done {
			return
		}
	}
	// Writes' events stored with their versions stay on the drives of the
	// pool the versions were written to: the pool is kept until they are
	// delivered (a replicated version's status follows its event, and a
	// notification would be lost with the pool).
	if held, err := storedEvents(ctx, pr.Entry.Pool); err != nil || held > 0 {
		n.cfg.Log.Info("pool drained; waiting for the events stored on its drives to be delivered", "pool", pr.Layout.Name, "events", held, "err", err)
		return
	}
	if err := n.setPoolStateEverywhere(ctx, pr.Layout.Name, erasure.StateDecommissioned); err != nil {
		n.cfg.Log.Warn("pool decommissioned, but not every node was told", "pool", pr.Layout.Name, "err", err)
	}
	n.cfg.Log.Info("pool decommissioned: empty, can be removed from the topology", "pool", pr.Layout.Name)
}

// storedEvents counts the writes' events a pool's online drives hold
// (events are stored on write quorum of a set's drives, so the drives
// that answer hold a copy of each: a drive left out is no error).
func storedEvents(ctx context.Context, p *erasure.Pool) (int, error) {
	n := 0
	err := p.ListEvents(ctx, func([16]byte, []byte) error { n++; return nil })
	if errors.Is(err, objlayer.ErrPartialListing) {
		err = nil
	}
	return n, err
}

// StartDecommission implements admin.Node.
func (n *Node) StartDecommission(ctx context.Context, pool string) error {
	pr := n.poolRuntime(pool)
	if pr == nil {
		return fmt.Errorf("%w: %q", admin.ErrNoSuchPool, pool)
	}
	active := 0
	for _, p := range n.dep.PoolRuntimes() {
		if p.Entry.State() == erasure.StateActive && p != pr {
			active++
		}
	}
	if active == 0 {
		return fmt.Errorf("pool %s is the only active pool: add a pool before decommissioning it", pool)
	}
	return n.setPoolStateEverywhere(ctx, pool, erasure.StateDraining)
}

// CancelDecommission implements admin.Node: the pool takes new objects
// again; what moved stays moved.
func (n *Node) CancelDecommission(ctx context.Context, pool string) error {
	pr := n.poolRuntime(pool)
	if pr == nil {
		return fmt.Errorf("%w: %q", admin.ErrNoSuchPool, pool)
	}
	if pr.Entry.State() == erasure.StateDecommissioned {
		return fmt.Errorf("pool %s is already decommissioned", pool)
	}
	return n.setPoolStateEverywhere(ctx, pool, erasure.StateActive)
}

// topologyRetry is how long a topology file not fully applied waits
// before it is applied again.
const topologyRetry = 30 * time.Second

// watchTopology re-reads the topology file and applies what changed:
// appended pools are brought up, states follow the file, layout changes
// are refused (the running configuration is kept).
func (n *Node) watchTopology(ctx context.Context) {
	last, _ := os.ReadFile(n.cfg.TopologyFile)
	var retry time.Time // zero: the last file was applied whole
	tick(ctx, 2*time.Second, func() {
		data, err := os.ReadFile(n.cfg.TopologyFile)
		if err != nil || string(data) == string(last) && (retry.IsZero() || time.Now().Before(retry)) {
			return
		}
		last, retry = data, time.Time{}
		topo, err := cluster.ParseTopology(data)
		if err != nil {
			n.cfg.Log.Error("topology file not applied; keeping the running configuration", "err", err)
			return
		}
		if err := n.applyTopology(ctx, topo); err != nil {
			// Applied again in a while: what refused may change (a pool
			// not answering yet, a decommission learned meanwhile).
			retry = time.Now().Add(topologyRetry)
			n.cfg.Log.Error("topology file not fully applied", "err", err, "retry", topologyRetry)
		}
	})
}

// applyTold gives a pool just added the state a peer told this node
// before it ran the pool. A pool the topology lists Active is not the one
// told about (a pool of the same name created again): the note is dropped.
func (n *Node) applyTold(pr *cluster.PoolRuntime, listed string) error {
	n.mu.Lock()
	state, ok := n.told[pr.Layout.Name]
	delete(n.told, pr.Layout.Name)
	n.mu.Unlock()
	if !ok || listed == cluster.PoolActive || listed == "" || state == pr.Entry.State() {
		return nil
	}
	return n.SetPoolState(pr.Layout.Name, state, true)
}

func (n *Node) applyTopology(ctx context.Context, topo cluster.Topology) error {
	running := n.dep.PoolRuntimes()
	byName := map[string]*cluster.PoolRuntime{}
	for _, pr := range running {
		byName[pr.Layout.Name] = pr
	}
	var errs []error
	listed := map[string]bool{}
	for i, spec := range topo.Pools {
		listed[spec.Name] = true
		pr, ok := byName[spec.Name]
		if !ok {
			n.cfg.Log.Info("pool added to the topology; bringing it up", "pool", spec.Name)
			added, err := n.dep.AddPool(ctx, spec, i)
			if err != nil {
				errs = append(errs, fmt.Errorf("adding pool %s: %w", spec.Name, err))
				continue
			}
			if err := n.applyTold(added, spec.State); err != nil {
				errs = append(errs, err)
			}
			n.startPool(added)
			continue
		}
		layout, err := spec.Layout(locality(n.cfg, 30*time.Second))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := pr.Layout.SameLayout(layout); err != nil {
			errs = append(errs, err)
			continue
		}
		var o struct{ State string }
		overridden := readJSONFile(pr, pr.LocalSlots(), overrideFile, &o) && o.State != ""
		// Decommissioned is for good: a topology that still says Draining
		// (written before the drain ended, or loaded late) does not take a
		// drained pool back, which would have its gone servers looked at
		// for every object.
		final := pr.Entry.State() == erasure.StateDecommissioned
		if !overridden && !final && pr.Entry.State() != layout.State {
			n.cfg.Log.Info("pool state from the topology", "pool", spec.Name, "state", layout.State)
			pr.Entry.SetState(layout.State)
		}
	}
	for _, pr := range running {
		if listed[pr.Layout.Name] {
			continue
		}
		if pr.Entry.State() != erasure.StateDecommissioned {
			errs = append(errs, fmt.Errorf("pool %s was removed from the topology but is not decommissioned; it keeps serving its objects", pr.Layout.Name))
			continue
		}
		n.dep.RemovePool(pr.Layout.Name)
		n.stopPool(pr.Layout.Name)
		n.cfg.Log.Info("decommissioned pool removed", "pool", pr.Layout.Name)
	}
	return errors.Join(errs...)
}
