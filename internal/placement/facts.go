package placement

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

const hostnameKey = corev1.LabelHostname

func indexClasses(list []storagev1.StorageClass) map[string]*storagev1.StorageClass {
	m := make(map[string]*storagev1.StorageClass, len(list))
	for i := range list {
		m[list[i].Name] = &list[i]
	}
	return m
}

func distinct(names []string) []string {
	var out []string
	for _, n := range names {
		if !slicesContains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkStorageClasses is the storage preflight: every class exists, local
// classes bind where the pod lands, the drive size fits what the classes
// report (CSIStorageCapacity) and can grow when it grew.
func checkStorageClasses(in Input, classes map[string]*storagev1.StorageClass, eligible []*corev1.Node, facts Facts) []Problem {
	spec := &in.Spec
	var out []Problem
	size := spec.Storage.Size
	grew := in.ProvisionedSize != nil && size.Cmp(*in.ProvisionedSize) > 0
	for _, name := range distinct(spec.Storage.StorageClassNames) {
		sc, ok := classes[name]
		if !ok {
			out = append(out, Problem{Reason: v1.ReasonStorageClassMissing, Message: fmt.Sprintf(
				"StorageClass %q does not exist: create it, or re-create the pool with an existing class in spec.storage.storageClassNames", name)})
			continue
		}
		if spec.Storage.Media == v1.MediaLocalNVMe &&
			(sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer) {
			out = append(out, Problem{Reason: v1.ReasonBindingModeImmediate, Message: fmt.Sprintf(
				"StorageClass %q binds volumes before pods are scheduled (volumeBindingMode Immediate); LocalNVMe drives must be bound on the node the server runs on: use a class with volumeBindingMode: WaitForFirstConsumer", name)})
		}
		if grew && (sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion) {
			out = append(out, Problem{Reason: v1.ReasonExpansionNotAllowed, Message: fmt.Sprintf(
				"storage.size grew from %s to %s but StorageClass %q does not allow volume expansion (allowVolumeExpansion); the drives keep %s: set storage.size back or enable expansion on the class",
				in.ProvisionedSize.String(), size.String(), name, in.ProvisionedSize.String())})
		}
		if in.ProvisionedSize == nil || grew {
			if p, ok := checkCapacity(name, spec, eligible, facts.Capacities); !ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// checkCapacity passes when the class publishes no CSIStorageCapacity, or
// when some published segment reachable from an eligible node fits one drive.
func checkCapacity(class string, spec *v1.ServerPoolSpec, eligible []*corev1.Node, caps []storagev1.CSIStorageCapacity) (Problem, bool) {
	size := spec.Storage.Size
	seen := false
	var largest *string
	largestQ := int64(-1)
	for i := range caps {
		c := &caps[i]
		if c.StorageClassName != class {
			continue
		}
		seen = true
		limit := c.MaximumVolumeSize
		if limit == nil {
			limit = c.Capacity
		}
		if limit == nil || !reachable(c.NodeTopology, eligible) {
			continue
		}
		if limit.Cmp(size) >= 0 {
			return Problem{}, true
		}
		if v := limit.Value(); v > largestQ {
			largestQ = v
			s := limit.String()
			largest = &s
		}
	}
	if !seen {
		return Problem{}, true
	}
	most := "nothing"
	if largest != nil {
		most = *largest
	}
	return Problem{Reason: v1.ReasonInsufficientCapacity, Message: fmt.Sprintf(
		"StorageClass %q: CSIStorageCapacity reports at most %s for one volume on the eligible nodes, but storage.size is %s: use smaller drives (more servers or volumesPerServer in a new pool) or add capacity",
		class, most, size.String())}, false
}

func reachable(sel *metav1.LabelSelector, eligible []*corev1.Node) bool {
	if sel == nil {
		return len(eligible) > 0
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	for _, n := range eligible {
		if s.Matches(labels.Set(n.Labels)) {
			return true
		}
	}
	return false
}

// eligibleNodes are the nodes a server may run on: schedulable, matching
// spec.nodeSelector, carrying the failure-domain label, and inside the
// allowedTopologies of every storage class the pool uses.
func eligibleNodes(spec *v1.ServerPoolSpec, classes map[string]*storagev1.StorageClass, nodes []corev1.Node) []*corev1.Node {
	key := spec.Topology.FailureDomainKey
	var terms [][]corev1.TopologySelectorTerm
	for _, name := range distinct(spec.Storage.StorageClassNames) {
		if sc, ok := classes[name]; ok && len(sc.AllowedTopologies) > 0 {
			terms = append(terms, sc.AllowedTopologies)
		}
	}
	out := make([]*corev1.Node, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if n.Spec.Unschedulable {
			continue
		}
		if _, ok := n.Labels[key]; !ok {
			continue
		}
		if !matchesSelector(n.Labels, spec.NodeSelector) {
			continue
		}
		ok := true
		for _, t := range terms {
			if !matchesTopology(n.Labels, t) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, n)
		}
	}
	return out
}

func matchesSelector(nodeLabels, sel map[string]string) bool {
	for k, v := range sel {
		if nodeLabels[k] != v {
			return false
		}
	}
	return true
}

// matchesTopology: a node matches allowedTopologies when it matches one
// term, i.e. every expression of that term.
func matchesTopology(nodeLabels map[string]string, terms []corev1.TopologySelectorTerm) bool {
	for _, term := range terms {
		all := true
		for _, e := range term.MatchLabelExpressions {
			if !slicesContains(e.Values, nodeLabels[e.Key]) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// assignDomains counts the failure domains the pool can use and reports
// what is missing: a domain without nodes, too few nodes for one LocalNVMe
// server per node.
func (sh *shape) assignDomains(spec *v1.ServerPoolSpec, eligible []*corev1.Node) []Problem {
	key := spec.Topology.FailureDomainKey
	local := spec.Storage.Media == v1.MediaLocalNVMe
	where := describeSelector(spec)
	var out []Problem
	if sh.explicit {
		perValue := map[string]int{}
		for _, n := range eligible {
			perValue[n.Labels[key]]++
		}
		for _, d := range spec.Topology.Domains {
			got := perValue[domainValue(d)]
			switch {
			case got == 0:
				out = append(out, Problem{Reason: v1.ReasonNoMatchingNodes, Message: fmt.Sprintf(
					"domain %q: no schedulable node has %s=%s%s: label the domain's nodes or fix spec.topology.domains", d.Name, key, domainValue(d), where)})
			case local && got < sh.perDomain:
				out = append(out, Problem{Reason: v1.ReasonNoMatchingNodes, Message: fmt.Sprintf(
					"domain %q: LocalNVMe runs one server per node and the domain has %d servers, but only %d schedulable node(s) have %s=%s%s: add nodes to the domain",
					d.Name, sh.perDomain, got, key, domainValue(d), where)})
			}
		}
		return out
	}
	values := map[string]struct{}{}
	for _, n := range eligible {
		values[n.Labels[key]] = struct{}{}
	}
	sh.domains = min(len(values), sh.servers)
	switch {
	case len(eligible) == 0:
		out = append(out, Problem{Reason: v1.ReasonNoMatchingNodes, Message: fmt.Sprintf(
			"no schedulable node has the failure-domain label %s%s: label the storage nodes or change spec.topology.failureDomainKey / spec.nodeSelector", key, where)})
	case local && len(eligible) < sh.servers:
		out = append(out, Problem{Reason: v1.ReasonNoMatchingNodes, Message: fmt.Sprintf(
			"LocalNVMe runs one server per node: %d servers need %d nodes, but only %d schedulable node(s) have %s%s: add nodes or use fewer servers",
			sh.servers, sh.servers, len(eligible), key, where)})
	}
	return out
}

func describeSelector(spec *v1.ServerPoolSpec) string {
	parts := []string{}
	if len(spec.NodeSelector) > 0 {
		keys := make([]string, 0, len(spec.NodeSelector))
		for k := range spec.NodeSelector {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sel := make([]string, 0, len(keys))
		for _, k := range keys {
			sel = append(sel, k+"="+spec.NodeSelector[k])
		}
		parts = append(parts, "spec.nodeSelector "+strings.Join(sel, ","))
	}
	if len(parts) == 0 {
		return ""
	}
	return " and matches " + strings.Join(parts, ", ")
}

// groups are the pool's StatefulSets with their scheduling constraints.
func groups(spec *v1.ServerPoolSpec, sh *shape, podLabels map[string]string) []Group {
	key := spec.Topology.FailureDomainKey
	sel := &metav1.LabelSelector{MatchLabels: podLabels}
	local := spec.Storage.Media == v1.MediaLocalNVMe
	// LocalNVMe: one server per node, required (its drives are that node's).
	var anti *corev1.PodAntiAffinity
	if local {
		anti = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: sel, TopologyKey: hostnameKey,
		}}}
	}
	if !sh.explicit {
		g := Group{Replicas: sh.servers}
		if anti != nil {
			g.Affinity = &corev1.Affinity{PodAntiAffinity: anti}
		}
		if !local || key != hostnameKey {
			g.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel,
			}}
		}
		return []Group{g}
	}
	out := make([]Group, 0, sh.domains)
	for i, d := range spec.Topology.Domains {
		g := Group{
			Suffix: d.Name, Domain: domainValue(d), Replicas: sh.perDomain, FirstServer: i * sh.perDomain,
			Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{domainValue(d)},
					}}}},
				}},
				PodAntiAffinity: anti,
			},
		}
		if !local && key != hostnameKey {
			// Inside a domain, prefer separate nodes.
			g.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: hostnameKey, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel,
			}}
		}
		out = append(out, g)
	}
	return out
}

// claims: one template per drive index, storage classes round robin.
func claims(spec *v1.ServerPoolSpec) []Claim {
	names := spec.Storage.StorageClassNames
	out := make([]Claim, spec.VolumesPerServer)
	for i := range out {
		out[i] = Claim{Name: fmt.Sprintf("data%d", i)}
		if len(names) > 0 {
			out[i].StorageClassName = names[i%len(names)]
		}
	}
	return out
}
