package builders

import (
	"fmt"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// PoolDeletionRefusal says why deleting a ServerPool now would lose
// objects, or "" when it may go. A pool that has run has formatted drives
// that may hold objects; while its Tenant stays, the only loss-free way out
// is the engine's decommission, which moves its objects to the tenant's
// other pools. Deleting the Tenant (or its namespace) deletes everything on
// purpose, and AnnotationDeleteWithData is the explicit override.
func PoolDeletionRefusal(p *v1.ServerPool, t *v1.Tenant, namespaceTerminating bool) string {
	switch {
	case t == nil || !t.DeletionTimestamp.IsZero() || namespaceTerminating:
		return ""
	case p.Annotations[v1.AnnotationDeleteWithData] == "true":
		return ""
	case p.Status.PoolState == v1.PoolStateDecommissioned:
		return ""
	case p.Status.PoolState == "" && p.Status.ReadyServers == 0 && !drivesSeen(p.Status.Drives):
		return "" // never ran: no drive was formatted
	}
	return fmt.Sprintf("ServerPool %s may hold objects of Tenant %s (its servers have run; engine state %q): deleting it "+
		"would make them unreadable. Decommission it first — POST /strata/admin/v1/pools/%s/decommission on the tenant's "+
		"S3 endpoint with the root credentials, then wait until the pool's status.poolState is %s — or delete the Tenant, "+
		"or annotate the pool %s=true to delete it with its data",
		p.Name, t.Name, stateOrUnknown(p.Status.PoolState), p.Name, v1.PoolStateDecommissioned, v1.AnnotationDeleteWithData)
}

func drivesSeen(d v1.DriveCounts) bool { return d.Online+d.Offline+d.Healing > 0 }

func stateOrUnknown(s string) string {
	if s == "" {
		return "not reported yet"
	}
	return s
}
