// Package placement decides where a ServerPool's servers and drives go and
// proves what failures the result survives.
//
// From a pool's spec and facts about the cluster (Nodes, StorageClasses,
// CSIStorageCapacity) it computes the StatefulSets of the pool (one per
// explicit failure domain, or one spread over the domains), their scheduling
// constraints, one volume claim template per drive index, the erasure layout
// (set size and parity, media defaults), the drive order that makes every
// erasure set span failure domains evenly, and the tolerance of the result:
// how many drives, servers, failure domains and storage backends may fail
// with reads, and with writes, still working. A spec whose layout cannot give
// spec.topology.tolerate is refused with a Problem that says what to change.
//
// The package is pure (no client, no clock) and cheap enough to run on every
// reconcile. docs/placement.md explains the model with worked examples.
package placement

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// Facts are what the controller observed of the cluster, listed from its
// cache. Capacities may be empty (no CSI driver publishes them).
type Facts struct {
	Nodes          []corev1.Node
	StorageClasses []storagev1.StorageClass
	Capacities     []storagev1.CSIStorageCapacity
}

// Input is one pool to place.
type Input struct {
	// Spec of the ServerPool.
	Spec v1.ServerPoolSpec
	// PodLabels select every server pod of the pool, across its StatefulSets;
	// anti-affinity and spread constraints count pods with them.
	PodLabels map[string]string
	// Pinned is the erasure layout the pool was created with
	// (status.layout). Once a pool exists its set size and parity never
	// change, whatever the cluster looks like now.
	Pinned *Erasure
	// ProvisionedSize is the size of the pool's existing claims; nil before
	// any claim exists.
	ProvisionedSize *resource.Quantity
}

// Erasure is a set size and parity.
type Erasure struct {
	SetSize int
	Parity  int
}

// Plan is the result of placing a pool.
type Plan struct {
	// Layout is the erasure layout and drive order.
	Layout Layout
	// Groups are the pool's StatefulSets, in endpoint order.
	Groups []Group
	// Claims are the volume claim templates, one per drive index.
	Claims []Claim
	// Domains is the number of failure domains the tolerance counts.
	Domains int
	// DomainsKnown is true when every server's domain is fixed by the spec
	// (explicit domains). Otherwise servers are spread over Domains domains
	// by the scheduler and the tolerance assumes the worst spread.
	DomainsKnown bool
	// DrivesPerDomain, for explicit domains, in spec order.
	DrivesPerDomain []DomainDrives
	// Read and Write are what the layout survives with reads, and with
	// writes, still working. Write is never more than Read; it is what the
	// pool reports in status.tolerates and what spec.topology.tolerate is
	// checked against.
	Read, Write Tolerance
	// Problems block creating the pool (preflight failures, a tolerance
	// that cannot be met). Each names what to change.
	Problems []Problem
}

// OK reports whether the plan has no problems.
func (p *Plan) OK() bool { return len(p.Problems) == 0 }

// Layout is an erasure layout with the order of drives in its sets.
type Layout struct {
	Sets, SetSize, Parity int
	// DriveOrder: slot k (set k/SetSize, position k%SetSize) is expanded
	// endpoint DriveOrder[k]; endpoints expand host-major (server s, drive v
	// is endpoint s*volumesPerServer+v). See docs/topology.md.
	DriveOrder []int
}

// DomainDrives counts the drives in one explicit domain.
type DomainDrives struct {
	Domain string
	Drives int
}

// Tolerance counts failures of each kind that the pool survives at once.
type Tolerance struct {
	Drives, Servers, Domains int
	// Backends is meaningful only when HasBackends: NVMeoF and ArrayLUN
	// pools, whose storage classes are enclosures or arrays.
	Backends    int
	HasBackends bool
}

// Problem is why a pool cannot be created as specified.
type Problem struct {
	// Reason is one of the v1alpha1 Reason constants.
	Reason string
	// Message says what is wrong and what to change.
	Message string
}

// Group is one StatefulSet of the pool.
type Group struct {
	// Suffix is appended to the pool's StatefulSet name ("" for a single
	// StatefulSet, the domain name otherwise).
	Suffix string
	// Domain is the failureDomainKey value the group is pinned to ("" when
	// spread).
	Domain string
	// Replicas is the number of servers; FirstServer the pool-wide index of
	// its first server (endpoints list groups in order).
	Replicas, FirstServer int
	// Affinity and TopologySpreadConstraints of the group's pods.
	Affinity                  *corev1.Affinity
	TopologySpreadConstraints []corev1.TopologySpreadConstraint
}

// Claim is the volume claim template of one drive index.
type Claim struct {
	// Name of the template ("data0", ...); the drive mounts at /<Name>.
	Name             string
	StorageClassName string
}

// Compute places a pool. It never fails: what cannot work is in
// Plan.Problems.
func Compute(in Input, facts Facts) Plan {
	spec := &in.Spec
	sh := newShape(spec)
	var plan Plan

	classes := indexClasses(facts.StorageClasses)
	eligible := eligibleNodes(spec, classes, facts.Nodes)
	plan.Problems = append(plan.Problems, checkStorageClasses(in, classes, eligible, facts)...)

	domainProblems := sh.assignDomains(spec, eligible)
	plan.Problems = append(plan.Problems, domainProblems...)

	plan.Groups = groups(spec, sh, in.PodLabels)
	plan.Claims = claims(spec)
	plan.Domains = sh.domains
	plan.DomainsKnown = sh.explicit
	if sh.explicit {
		for _, d := range spec.Topology.Domains {
			plan.DrivesPerDomain = append(plan.DrivesPerDomain, DomainDrives{Domain: domainValue(d), Drives: sh.perDomain * sh.volumes})
		}
	}

	req := required(spec)
	var chosen evaluated
	if in.Pinned != nil {
		chosen = sh.evaluate(in.Pinned.SetSize, in.Pinned.Parity)
	} else {
		var ok bool
		chosen, ok = sh.choose(spec, req)
		if !ok && len(domainProblems) == 0 {
			plan.Problems = append(plan.Problems, sh.refusal(spec, req, chosen))
		}
	}
	plan.Layout = Layout{
		Sets:       sh.drives() / chosen.setSize,
		SetSize:    chosen.setSize,
		Parity:     chosen.parity,
		DriveOrder: chosen.order,
	}
	plan.Read, plan.Write = chosen.read, chosen.write
	return plan
}

// DriveOrder is the order of a pool's drives in its erasure sets for a set
// size: what the topology file's driveOrder holds. It depends on the spec
// only, so the Tenant controller can render it without cluster facts.
func DriveOrder(spec v1.ServerPoolSpec, setSize int) []int {
	sh := newShape(&spec)
	return sh.order(setSize)
}

// required is the tolerance spec.topology.tolerate asks for.
func required(spec *v1.ServerPoolSpec) Tolerance {
	t := Tolerance{Drives: int(spec.Topology.Tolerate.Drives), Servers: int(spec.Topology.Tolerate.Servers), Domains: 1}
	if spec.Topology.Tolerate.Domains != nil {
		t.Domains = int(*spec.Topology.Tolerate.Domains)
	}
	return t
}

// meets reports whether tolerance t satisfies requirement req.
func meets(t, req Tolerance) bool {
	return t.Drives >= req.Drives && t.Servers >= req.Servers && t.Domains >= req.Domains
}

// ToStatus converts a tolerance for status.tolerates.
func (t Tolerance) ToStatus() *v1.FaultTolerance {
	ft := &v1.FaultTolerance{Drives: int32(t.Drives), Servers: int32(t.Servers), Domains: int32(t.Domains)}
	if t.HasBackends {
		b := int32(t.Backends)
		ft.Backends = &b
	}
	return ft
}

// LayoutStatus converts the layout for status.layout.
func (p *Plan) LayoutStatus() *v1.ErasureLayout {
	l := &v1.ErasureLayout{Sets: int32(p.Layout.Sets), SetSize: int32(p.Layout.SetSize), Parity: int32(p.Layout.Parity)}
	for _, d := range p.DrivesPerDomain {
		l.DrivesPerDomain = append(l.DrivesPerDomain, v1.DomainDrives{Domain: d.Domain, Drives: int32(d.Drives)})
	}
	return l
}

// MediaDefaultParity is the parity used when spec.erasure.parity is 0.
// JBOD-like media (LocalNVMe, NVMeoF) spend about a quarter of the set, at
// least 2; ArrayLUN is protected by its array already and spends 1. Parity
// is never more than half the set.
func MediaDefaultParity(media v1.Media, setSize int) int {
	p := 1
	if media != v1.MediaArrayLUN {
		p = max(2, (setSize+2)/4)
	}
	return min(p, setSize/2)
}

func domainValue(d v1.FailureDomain) string {
	if d.Value != "" {
		return d.Value
	}
	return d.Name
}
