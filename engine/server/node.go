package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/admin"
	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/engine/cluster"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/internode"
	"github.com/strata-storage/strata/engine/metrics"
)

// Ready implements health.Checker: serving, not shutting down, and every
// set of every pool readable.
func (n *Node) Ready() (bool, string) {
	switch {
	case n.stopping.Load():
		return false, "shutting down"
	case !n.ready.Load():
		return false, "starting"
	}
	return n.quorum(false, func(l cluster.PoolLayout) int { return l.SetSize - l.Parity })
}

// quorum checks that every set keeps need(layout) drives online, leaving
// out this node's drives when without is set.
func (n *Node) quorum(without bool, need func(cluster.PoolLayout) int) (bool, string) {
	for _, pr := range n.dep.PoolRuntimes() {
		if pr.Entry.State() == erasure.StateDecommissioned {
			continue
		}
		l := pr.Layout
		for s := 0; s < l.Sets; s++ {
			up := 0
			for i := 0; i < l.SetSize; i++ {
				slot := s*l.SetSize + i
				if without && l.Drives[slot].Local {
					continue
				}
				if pr.Online(slot) {
					up++
				}
			}
			if up < need(l) {
				what := "online"
				if without {
					what = "online without this node"
				}
				return false, fmt.Sprintf("pool %s set %d has %d drives %s, %d needed", l.Name, s, up, what, need(l))
			}
		}
	}
	return true, ""
}

func writeQuorum(l cluster.PoolLayout) int {
	lay, _ := erasure.NewLayout(l.SetSize, l.Parity)
	return lay.WriteQuorum()
}

// ClusterHealthy implements health.Checker: every set has write quorum;
// with maintenance, it would keep it with this node down (the operator's
// upgrade gate). The gate pings every peer first, so it answers from what
// the peers say now: a node that stopped a moment ago (before the next
// heartbeat) or that no longer serves a drive is not counted.
func (n *Node) ClusterHealthy(maintenance bool) (bool, string) {
	if maintenance {
		n.checkPeers()
	}
	if ok, why := n.quorum(false, writeQuorum); !ok {
		return false, why
	}
	if maintenance {
		if ok, why := n.quorum(true, writeQuorum); !ok {
			return false, why
		}
		return n.readableWithout()
	}
	return true, ""
}

// readableWithout checks that every set keeps read quorum without this
// node's drives counting only drives that hold every object: not a drive
// that a node still has writes to heal onto (it missed them while away)
// nor one being rebuilt. With one node's drives equal to a set's parity,
// an object written while another node was away has no copy to spare
// until that node has caught up.
func (n *Node) readableWithout() (bool, string) {
	ctx, cancel := context.WithTimeout(n.bg, gatePingTimeout)
	defer cancel()
	behind := map[string]map[int]uint32{}
	add := func(b map[string]map[int]uint32) {
		for pool, sets := range b {
			if behind[pool] == nil {
				behind[pool] = map[int]uint32{}
			}
			for set, missed := range sets {
				behind[pool][set] |= missed
			}
		}
	}
	add(n.behind())
	for _, st := range n.remoteStatus(ctx) {
		add(st.Behind)
	}
	for _, pr := range n.dep.PoolRuntimes() {
		if pr.Entry.State() == erasure.StateDecommissioned {
			continue
		}
		l := pr.Layout
		need := l.SetSize - l.Parity
		for s := 0; s < l.Sets; s++ {
			whole, lagging := 0, 0
			for i := 0; i < l.SetSize; i++ {
				slot := s*l.SetSize + i
				if l.Drives[slot].Local || !pr.Online(slot) {
					continue
				}
				if behind[l.Name][s]&(1<<i) != 0 {
					lagging++
					continue
				}
				whole++
			}
			if whole < need {
				return false, fmt.Sprintf("pool %s set %d would have %d drives holding every object without this node, %d needed: %d still heal what they missed",
					l.Name, s, whole, need, lagging)
			}
		}
	}
	return true, ""
}

// behind is what this node's healers have still to rebuild, by pool and
// set (erasure.Healer.Behind).
func (n *Node) behind() map[string]map[int]uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]map[int]uint32{}
	for pool, h := range n.healers {
		if b := h.Behind(); len(b) > 0 {
			out[pool] = b
		}
	}
	return out
}

// gatePingTimeout bounds the pings of the maintenance gate (the operator
// waits 5 s for its answer).
const gatePingTimeout = 2 * time.Second

// checkPeers pings every peer at once (Peer.Check).
func (n *Node) checkPeers() {
	ctx, cancel := context.WithTimeout(n.bg, gatePingTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range n.dep.Peers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.Check(ctx)
		}()
	}
	wg.Wait()
}

// driveState names a slot's state as this node sees it.
func (n *Node) driveState(pr *cluster.PoolRuntime, slot int) string {
	l := pr.Layout
	switch {
	case !pr.Online(slot):
		return "offline"
	case l.Drives[slot].Local:
		if h := n.healer(l.Name); h != nil && h.Healing(slot/l.SetSize, slot%l.SetSize) {
			return "healing"
		}
	}
	return "online"
}

// Info implements admin.Node: every pool and drive as this node sees them;
// a remote drive's capacity and healing come from its node.
func (n *Node) Info(ctx context.Context) adminapi.Info {
	info := adminapi.Info{
		Version: buildinfo.String(), ProtocolVersion: n.cfg.InternodeProtocol, DeploymentID: n.dep.ID.String(), Mode: "server",
		Uptime: time.Since(n.started).Round(time.Second).String(),
	}
	remote := n.remoteStatus(ctx)
	for _, pr := range n.dep.PoolRuntimes() {
		l := pr.Layout
		p := adminapi.PoolInfo{Name: l.Name, State: pr.Entry.State(), Sets: l.Sets, SetSize: l.SetSize, Parity: l.Parity}
		var free uint64
		for slot, ep := range l.Drives {
			di := adminapi.DriveInfo{Endpoint: ep.Raw, Set: slot / l.SetSize, Index: slot % l.SetSize, State: n.driveState(pr, slot)}
			if ep.Local {
				if d := pr.Local(slot); d != nil {
					if u, err := d.DiskInfo(ctx); err == nil {
						di.TotalBytes, di.FreeBytes, di.UsedBytes = u.Total, u.Free, u.Total-u.Free
					}
				}
			} else if r, ok := remote[ep.Host]; ok {
				if rd, ok := r.Drives[ep.Path]; ok {
					di.TotalBytes, di.FreeBytes, di.UsedBytes = rd.TotalBytes, rd.FreeBytes, rd.TotalBytes-rd.FreeBytes
					if di.State == "online" && rd.State != "" {
						di.State = rd.State
					}
				}
			}
			info.Capacity.TotalBytes += di.TotalBytes
			info.Capacity.FreeBytes += di.FreeBytes
			info.Capacity.UsedBytes += di.UsedBytes
			free += di.FreeBytes
			p.Drives = append(p.Drives, di)
		}
		info.Capacity.UsableBytes += free / uint64(l.SetSize) * uint64(l.SetSize-l.Parity)
		info.Pools = append(info.Pools, p)
	}
	return info
}

// nodeStatus is what a node says of itself to its peers. Behind came
// later: an older node does not send it.
type nodeStatus struct {
	Drives map[string]driveStatus  `json:"drives"`
	Drains map[string][]drainEntry `json:"drains"`
	// Behind: by pool and set, the positions of the drives this node has
	// objects to heal onto (erasure.Healer.Behind).
	Behind map[string]map[int]uint32 `json:"behind,omitempty"`
}

type driveStatus struct {
	State      string `json:"state"`
	TotalBytes uint64 `json:"totalBytes"`
	FreeBytes  uint64 `json:"freeBytes"`
}

// NodeStatus implements internode.NodeHooks.
func (n *Node) NodeStatus(ctx context.Context) any {
	st := nodeStatus{Drives: map[string]driveStatus{}, Drains: n.localDrains(), Behind: n.behind()}
	for _, pr := range n.dep.PoolRuntimes() {
		for _, slot := range pr.LocalSlots() {
			ds := driveStatus{State: n.driveState(pr, slot)}
			if d := pr.Local(slot); d != nil {
				if u, err := d.DiskInfo(ctx); err == nil {
					ds.TotalBytes, ds.FreeBytes = u.Total, u.Free
				}
			}
			st.Drives[pr.Layout.Drives[slot].Path] = ds
		}
	}
	return st
}

// remoteStatus asks every online peer for its status (by host).
func (n *Node) remoteStatus(ctx context.Context) map[string]nodeStatus {
	out := map[string]nodeStatus{}
	for _, p := range n.dep.Peers() {
		if !p.Online() {
			continue
		}
		var st nodeStatus
		if err := p.NodeStatus(ctx, &st); err == nil {
			out[p.Host] = st
		}
	}
	return out
}

var (
	_ internode.NodeHooks = (*Node)(nil)
	_ admin.Node          = (*Node)(nil)
)

// HealStatus implements admin.Node: the healers of this node's pools.
func (n *Node) HealStatus() adminapi.HealStatus {
	var total adminapi.HealStatus
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.healers {
		st := h.Status()
		total.QueueLength += st.QueueLength
		total.Deferred += st.Deferred
		total.WritesBehind += st.WritesBehind
		total.DeferredSample = append(total.DeferredSample, st.DeferredSample...)
		total.Queued += st.Queued
		total.Dropped += st.Dropped
		total.ObjectsHealed += st.ObjectsHealed
		total.ShardsHealed += st.ShardsHealed
		total.BytesHealed += st.BytesHealed
		total.Purged += st.Purged
		total.Failed += st.Failed
		total.ScanCycles += st.ScanCycles
		total.ScanObjects += st.ScanObjects
		total.Scanning = total.Scanning || st.Scanning
		if st.LastScanEnd != nil && (total.LastScanEnd == nil || st.LastScanEnd.After(*total.LastScanEnd)) {
			total.LastScanEnd = st.LastScanEnd
		}
		for _, d := range st.Drives {
			total.Drives = append(total.Drives, adminapi.DriveHealState(d))
		}
	}
	return total
}

// StartScan implements admin.Node: an integrity scan of the sets this node
// leads, in every pool.
func (n *Node) StartScan() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.healers {
		go h.Scan(n.bg)
	}
}

// stores reports the metadata stores of this node's drives that are
// open.
func (n *Node) stores() []metrics.Store {
	var out []metrics.Store
	for _, pr := range n.dep.PoolRuntimes() {
		l := pr.Layout
		for _, slot := range pr.LocalSlots() {
			d := pr.Local(slot)
			if d == nil {
				continue
			}
			st := d.StoreStats()
			out = append(out, metrics.Store{Pool: l.Name, Set: slot / l.SetSize, Index: slot % l.SetSize,
				AppliedBytes: st.AppliedBytes, WALBytes: st.WALBytes, FlushedBytes: st.FlushedBytes, CompactedBytes: st.CompactedBytes,
				CompactionDebt: st.CompactionDebt, L0Sublevels: st.L0Sublevels, Stalls: st.Stalls, StallSeconds: st.StallTime.Seconds(),
				LiveBytes: st.LiveBytes, CacheHits: st.CacheHits, CacheMisses: st.CacheMisses})
		}
	}
	return out
}

func (n *Node) snapshot(ctx context.Context) metrics.Snapshot {
	info := n.Info(ctx)
	hs := n.HealStatus()
	s := metrics.Snapshot{Heal: metrics.Heal{
		QueueLength: hs.QueueLength, Queued: hs.Queued, Dropped: hs.Dropped, ObjectsHealed: hs.ObjectsHealed,
		ShardsHealed: hs.ShardsHealed, BytesHealed: hs.BytesHealed, Purged: hs.Purged, Failed: hs.Failed,
		ScanCycles: hs.ScanCycles, ScanObjects: hs.ScanObjects, WritesBehind: hs.WritesBehind,
	}}
	for _, d := range hs.Drives {
		if !d.Done && d.Error == "" {
			s.Heal.DrivesHealing++
		}
	}
	for _, p := range info.Pools {
		s.Pools = append(s.Pools, metrics.Pool{Name: p.Name, State: p.State})
		sets := make([]metrics.Set, p.Sets)
		lay, _ := erasure.NewLayout(p.SetSize, p.Parity)
		for i := range sets {
			sets[i] = metrics.Set{Pool: p.Name, Set: i, Drives: p.SetSize, WriteQuorum: lay.WriteQuorum(), ReadQuorum: lay.ReadQuorum()}
		}
		for _, d := range p.Drives {
			s.Drives = append(s.Drives, metrics.Drive{Pool: p.Name, Set: d.Set, Index: d.Index,
				State: d.State, TotalBytes: d.TotalBytes, FreeBytes: d.FreeBytes})
			if d.Set >= len(sets) {
				continue
			}
			// A healing drive takes writes (it counts for quorum) but
			// lacks objects written while it was away.
			switch d.State {
			case "online":
				sets[d.Set].Online++
				sets[d.Set].Healthy++
			case "healing":
				sets[d.Set].Online++
			}
		}
		s.Sets = append(s.Sets, sets...)
	}
	for pool, drains := range n.localDrains() {
		for _, d := range drains {
			s.Drains = append(s.Drains, metrics.Drain{Pool: pool, Set: d.Set, Objects: d.Marker.Objects, Bytes: d.Marker.Bytes})
		}
	}
	for _, p := range n.dep.Peers() {
		if p.Online() {
			s.Peers.Online++
			s.Peers.ClockOffset = max(s.Peers.ClockOffset, p.ClockOffset(), -p.ClockOffset())
		} else {
			s.Peers.Offline++
		}
		s.Peers.OfflineEvents += p.OfflineEvents()
	}
	return s
}

// TLS implements admin.Informer: the leaf the S3 listener serves, the one
// internode connections present, and the CAs peers are verified against,
// as the listeners hold them now.
func (n *Node) TLS() adminapi.TLSInfo {
	var inter *x509.Certificate
	if n.internodeTLS != nil {
		inter = n.internodeTLS.Certificate()
	}
	return adminapi.NewTLSInfo(n.served.Leaf(), inter, n.trust.CAs())
}
