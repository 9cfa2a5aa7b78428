package builders

import (
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/placement"
)

// TopologyFileKey is the ConfigMap key the servers read.
const TopologyFileKey = "topology.json"

// TopologyVersion is the format version of topology.json.
const TopologyVersion = 1

// Topology is topology.json, the operator-engine contract of
// docs/topology.md.
type Topology struct {
	Version      int            `json:"version"`
	DeploymentID string         `json:"deploymentID"`
	Pools        []TopologyPool `json:"pools"`
}

// TopologyPool is one ServerPool in topology.json.
type TopologyPool struct {
	Name       string   `json:"name"`
	Endpoints  []string `json:"endpoints"`
	SetSize    int      `json:"setSize"`
	Parity     int      `json:"parity"`
	DriveOrder []int    `json:"driveOrder,omitempty"`
	State      string   `json:"state"`
}

// poolState is the state the file gives a pool: Draining when the user
// asked for its decommission (the engine drains a pool the file lists as
// Draining, and marks it Decommissioned itself once it is empty).
func poolState(p *v1.ServerPool) string {
	if p.Spec.Decommission {
		return v1.PoolStateDraining
	}
	return v1.PoolStateActive
}

// TopologyPools orders a tenant's ServerPools as the file lists them (by
// creation, then name) and keeps those whose layout is decided
// (status.layout): a pool joins the file once placement accepted it.
func TopologyPools(pools []v1.ServerPool) []v1.ServerPool {
	out := make([]v1.ServerPool, 0, len(pools))
	for _, p := range pools {
		if p.Status.Layout != nil && p.Status.Layout.SetSize > 0 {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].CreationTimestamp, out[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// PoolEndpoints are a pool's drive endpoints with ellipses, one argument per
// StatefulSet in server order (docs/topology.md).
func PoolEndpoints(t *v1.Tenant, p *v1.ServerPool, clusterDomain string) []string {
	var out []string
	for _, g := range groupsOf(p) {
		hosts := fmt.Sprintf("%s-%s", StatefulSetName(t.Name, p.Name, g.suffix), ellipsis(g.replicas))
		out = append(out, fmt.Sprintf("%s://%s.%s.%s.svc.%s:%d/data%s",
			Scheme(t), hosts, HeadlessServiceName(t.Name), t.Namespace, clusterDomain, S3Port, ellipsis(int(p.Spec.VolumesPerServer))))
	}
	return out
}

type groupRef struct {
	suffix   string
	replicas int
}

// groupsOf lists a pool's StatefulSets from its spec alone (the same split
// placement makes): one per explicit domain, or one.
func groupsOf(p *v1.ServerPool) []groupRef {
	n := len(p.Spec.Topology.Domains)
	if n == 0 {
		return []groupRef{{replicas: int(p.Spec.Servers)}}
	}
	out := make([]groupRef, 0, n)
	for _, d := range p.Spec.Topology.Domains {
		out = append(out, groupRef{suffix: d.Name, replicas: int(p.Spec.Servers) / n})
	}
	return out
}

func ellipsis(n int) string {
	if n == 1 {
		return "0"
	}
	return fmt.Sprintf("{0...%d}", n-1)
}

// TopologyConfigMap renders topology.json for a tenant's pools (already
// filtered and ordered by TopologyPools). The deployment ID is the Tenant's
// UID: stable for the tenant's life, different for a re-created tenant.
func TopologyConfigMap(t *v1.Tenant, pools []v1.ServerPool, clusterDomain string) (*corev1.ConfigMap, error) {
	doc := Topology{Version: TopologyVersion, DeploymentID: string(t.UID), Pools: []TopologyPool{}}
	for i := range pools {
		p := &pools[i]
		l := p.Status.Layout
		doc.Pools = append(doc.Pools, TopologyPool{
			Name:       p.Name,
			Endpoints:  PoolEndpoints(t, p, clusterDomain),
			SetSize:    int(l.SetSize),
			Parity:     int(l.Parity),
			DriveOrder: placement.DriveOrder(p.Spec, int(l.SetSize)),
			State:      poolState(p),
		})
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: TopologyConfigMapName(t.Name), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Data:       map[string]string{TopologyFileKey: string(data)},
	}, nil
}

// PoolInTopology reports whether a topology ConfigMap lists the pool, so
// its servers can start: a server refuses to run without its pool in the file.
func PoolInTopology(cm *corev1.ConfigMap, pool string) bool {
	var doc Topology
	if err := json.Unmarshal([]byte(cm.Data[TopologyFileKey]), &doc); err != nil {
		return false
	}
	for _, p := range doc.Pools {
		if p.Name == pool {
			return true
		}
	}
	return false
}
