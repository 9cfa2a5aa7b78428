package server

import (
	"context"
	"time"
)

// The lifecycle pass (lifecycle.Worker) runs on one node of the
// deployment: the node of the first drive of the first pool, which also
// scans that pool's first set. Its actions are idempotent, so two nodes
// running it at once during a topology change do no harm.

// DefaultLifecycleInterval is the pause between two lifecycle passes.
// Rules count in days; a pass an hour carries out an expiry within the hour
// of its time.
const DefaultLifecycleInterval = time.Hour

// leadsLifecycle reports whether this node runs the lifecycle pass.
func (n *Node) leadsLifecycle() bool {
	prs := n.dep.PoolRuntimes()
	return len(prs) > 0 && n.leads(prs[0], 0)
}

// runLifecycle runs a lifecycle pass every interval on the node that leads.
func (n *Node) runLifecycle(ctx context.Context) {
	every := n.cfg.LifecycleInterval
	if every <= 0 {
		every = DefaultLifecycleInterval
	}
	tick(ctx, every, func() {
		if !n.leadsLifecycle() {
			return
		}
		if err := n.lifecycle.Run(ctx, time.Now()); err != nil && ctx.Err() == nil {
			n.cfg.Log.Warn("lifecycle pass", "err", err)
		}
	})
}

// tick calls fn every interval until ctx ends (the first call one interval
// after the start).
func tick(ctx context.Context, every time.Duration, fn func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}
