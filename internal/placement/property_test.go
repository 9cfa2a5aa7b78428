package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// The properties placement promises, over thousands of shapes: 1-8 zones x
// 1-4 racks x 1-16 nodes per rack, failure domains by node, rack, zone or
// explicit lists, 1-3 enclosures, 1-2 arrays, 4-32 drives.
//
//   - the drive order is a permutation of the pool's drives;
//   - the reported read and write tolerance is exactly what a brute-force
//     enumeration of failures finds on the computed layout;
//   - an accepted layout meets spec.topology.tolerate, and when it must
//     survive a domain no erasure set has more than parity drives in one;
//   - a layout refused as ToleranceUnreachable cannot be met by any drive
//     order of any allowed set size and parity (a counting bound proves it);
//   - a pool refused for nodes really lacks them.
//
// The brute force shares no code with the planner: it counts shards per
// failed unit from the drive order, and enumerates failures over classes of
// interchangeable units (units holding the same number of drives of every
// set), which keeps it tractable without changing its answer.
func TestPlacementProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261122, 7))
	const want = 3000
	var accepted, refusedTolerance, refusedNodes int
	for checked := 0; checked < want; {
		c, ok := randomCase(rng)
		if !ok {
			continue
		}
		checked++
		p := place(c.spec, Facts{Nodes: c.nodes, StorageClasses: wffc(distinct(c.spec.Storage.StorageClassNames)...)})
		name := c.describe()
		checkPermutation(t, name, c.spec, p)
		checkTolerance(t, name, c, p)
		switch {
		case p.OK():
			accepted++
			checkAccepted(t, name, c, p)
		case hasReason(p, v1.ReasonNoMatchingNodes):
			refusedNodes++
			checkNodesLacking(t, name, c)
		case hasReason(p, v1.ReasonToleranceUnreachable):
			refusedTolerance++
			checkImpossible(t, name, c, p)
		default:
			t.Fatalf("%s: unexpected problems %+v", name, p.Problems)
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d shapes: %d accepted, %d refused for tolerance, %d refused for nodes", want, accepted, refusedTolerance, refusedNodes)
	if accepted < want/4 || refusedTolerance < want/20 {
		t.Fatalf("the generator no longer covers both outcomes well: %d accepted, %d refused", accepted, refusedTolerance)
	}
}

type propCase struct {
	spec                  v1.ServerPoolSpec
	nodes                 []nodeT
	zones, racks, perRack int
}

type nodeT = corev1.Node

func (c propCase) describe() string {
	s := c.spec
	return fmt.Sprintf("%s %dx%d classes=%v key=%s domains=%d tolerate={%d,%d,%d} erasure=%d/%d cluster=%dx%dx%d",
		s.Storage.Media, s.Servers, s.VolumesPerServer, s.Storage.StorageClassNames, s.Topology.FailureDomainKey,
		len(s.Topology.Domains), *s.Topology.Tolerate.Domains, s.Topology.Tolerate.Servers, s.Topology.Tolerate.Drives,
		s.Erasure.SetSize, s.Erasure.Parity, c.zones, c.racks, c.perRack)
}

// randomCase draws a shape; false when it is one the CRD's CEL rules refuse.
func randomCase(rng *rand.Rand) (propCase, bool) {
	c := propCase{zones: 1 + rng.IntN(8), racks: 1 + rng.IntN(4), perRack: 1 + rng.IntN(16)}
	c.nodes = cluster(c.zones, c.racks, c.perRack)
	media := []v1.Media{v1.MediaLocalNVMe, v1.MediaNVMeoF, v1.MediaArrayLUN}[rng.IntN(3)]
	var classes []string
	switch media {
	case v1.MediaLocalNVMe:
		classes = []string{"nvme-a", "nvme-b"}[:1+rng.IntN(2)]
	case v1.MediaNVMeoF:
		classes = []string{"enc-a", "enc-b", "enc-c"}[:1+rng.IntN(3)]
	case v1.MediaArrayLUN:
		classes = []string{"array-a", "array-b"}[:1+rng.IntN(2)]
	}
	servers := 1 + rng.IntN(16)
	var opts []poolOpt
	explicitD := 0
	switch rng.IntN(5) {
	case 0, 1:
		// by node (the default)
	case 2:
		opts = append(opts, domainKey(zoneKey))
	case 3:
		opts = append(opts, domainKey(rackKey))
	case 4:
		// explicit zones or racks
		var values []string
		if rng.IntN(2) == 0 {
			for z := range c.zones {
				values = append(values, fmt.Sprintf("z%d", z))
			}
			opts = append(opts, domains(zoneKey, values...))
		} else {
			for z := range c.zones {
				for r := range c.racks {
					values = append(values, fmt.Sprintf("z%d-r%d", z, r))
				}
			}
			if len(values) > 8 {
				values = values[:8]
			}
			opts = append(opts, domains(rackKey, values...))
		}
		explicitD = len(values)
		servers = explicitD * (1 + rng.IntN(max(1, 16/explicitD)))
	}
	volumes := 1 + rng.IntN(16)
	total := servers * volumes
	if total < 4 || total > 32 || servers > 16 {
		return c, false
	}
	td := int32(rng.IntN(4))
	ts := int32(rng.IntN(3))
	tdr := int32(rng.IntN(5))
	if rng.IntN(3) == 0 {
		ts, tdr = 0, 0
	}
	if ts >= int32(servers) || tdr >= int32(total) ||
		(explicitD > 0 && td >= int32(explicitD)) || (servers == 1 && explicitD == 0 && td != 0) {
		return c, false
	}
	opts = append(opts, tolerate(td, ts, tdr))
	if rng.IntN(5) == 0 {
		divs := []int{}
		for n := 2; n <= 16; n++ {
			if total%n == 0 {
				divs = append(divs, n)
			}
		}
		if len(divs) == 0 {
			return c, false
		}
		n := divs[rng.IntN(len(divs))]
		opts = append(opts, erasure(int32(n), int32(rng.IntN(n/2+1))))
	}
	c.spec = pool(media, int32(servers), int32(volumes), classes, opts...)
	return c, true
}

func hasReason(p Plan, reason string) bool {
	for _, pr := range p.Problems {
		if pr.Reason == reason {
			return true
		}
	}
	return false
}

func checkPermutation(t *testing.T, name string, spec v1.ServerPoolSpec, p Plan) {
	t.Helper()
	if p.Layout.SetSize == 0 {
		return
	}
	got := slices.Clone(p.Layout.DriveOrder)
	slices.Sort(got)
	for i, e := range got {
		if e != i {
			t.Fatalf("%s: drive order %v is not a permutation", name, p.Layout.DriveOrder)
		}
	}
	if len(got) != int(spec.Servers*spec.VolumesPerServer) {
		t.Fatalf("%s: drive order has %d drives", name, len(got))
	}
}

// failure units of the brute force, per expanded endpoint.
type units struct {
	server, domain, backend []int
	servers, domains        int
	backends                int
}

func unitsOf(c propCase) units {
	s := c.spec
	S, V := int(s.Servers), int(s.VolumesPerServer)
	u := units{servers: S}
	D := len(s.Topology.Domains)
	u.domains = D
	ids := map[string]int{}
	for _, n := range s.Storage.StorageClassNames {
		if _, ok := ids[n]; !ok {
			ids[n] = len(ids)
		}
	}
	u.backends = len(ids) // unused classes are units that hold nothing: harmless
	for e := range S * V {
		srv, v := e/V, e%V
		u.server = append(u.server, srv)
		if D > 0 {
			u.domain = append(u.domain, srv/(S/D))
		}
		u.backend = append(u.backend, ids[s.Storage.StorageClassNames[v%len(s.Storage.StorageClassNames)]])
	}
	return u
}

// spreadDomains is how many failure domains the scheduler can spread over:
// distinct values of the key among the nodes, at most one per server.
func spreadDomains(c propCase) int {
	vals := map[string]bool{}
	for _, n := range c.nodes {
		vals[n.Labels[c.spec.Topology.FailureDomainKey]] = true
	}
	return min(len(vals), int(c.spec.Servers))
}

func checkTolerance(t *testing.T, name string, c propCase, p Plan) {
	t.Helper()
	if p.Layout.SetSize == 0 {
		return
	}
	u := unitsOf(c)
	for _, mode := range []struct {
		label     string
		allowance int
		got       Tolerance
	}{
		{"read", p.Layout.Parity, p.Read},
		{"write", writeQuorumAllowance(p.Layout.SetSize, p.Layout.Parity), p.Write},
	} {
		want := bruteTolerance(c, u, p.Layout.DriveOrder, p.Layout.SetSize, mode.allowance)
		if mode.got != want {
			t.Fatalf("%s: %s tolerance %+v, brute force finds %+v (layout %d/%d, order %v)",
				name, mode.label, mode.got, want, p.Layout.SetSize, p.Layout.Parity, p.Layout.DriveOrder)
		}
	}
}

// writeQuorumAllowance restates the engine's quorum rule independently:
// write quorum is the data shard count, plus one when data equals parity.
func writeQuorumAllowance(setSize, parity int) int {
	data := setSize - parity
	quorum := data
	if data == parity {
		quorum++
	}
	return setSize - quorum
}

func bruteTolerance(c propCase, u units, order []int, setSize, allowance int) Tolerance {
	var tol Tolerance
	// Drives: any `t` drives may fail; the worst is all in one set.
	for t := 1; t <= len(order); t++ {
		if violates(classesOf(order, setSize, identity(len(order)), len(order)), t, allowance) {
			tol.Drives = t - 1
			break
		}
	}
	serverClasses := classesOf(order, setSize, u.server, u.servers)
	tol.Servers = firstViolation(serverClasses, u.servers, allowance)
	if u.domains > 0 {
		tol.Domains = firstViolation(classesOf(order, setSize, u.domain, u.domains), u.domains, allowance)
	} else {
		// Spread: t failed domains hold any servers, as many as a skew-1
		// spread allows: t*q + j with j of the t domains holding one more.
		Z := spreadDomains(c)
		S := int(c.spec.Servers)
		q, r := S/Z, S%Z
		tol.Domains = Z
		for t := 1; t <= Z; t++ {
			bad := false
			for j := max(0, t-(Z-r)); j <= min(t, r); j++ {
				if violates(serverClasses, t*q+j, allowance) {
					bad = true
				}
			}
			if bad {
				tol.Domains = t - 1
				break
			}
		}
	}
	if c.spec.Storage.Media != v1.MediaLocalNVMe {
		tol.HasBackends = true
		tol.Backends = firstViolation(classesOf(order, setSize, u.backend, u.backends), u.backends, allowance)
	}
	return tol
}

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func firstViolation(classes []unitClass, n, allowance int) int {
	for t := 1; t <= n; t++ {
		if violates(classes, t, allowance) {
			return t - 1
		}
	}
	return n
}

// unitClass is a group of interchangeable failure units: each holds
// perSet[i] drives of set i.
type unitClass struct {
	perSet []int
	size   int
}

func classesOf(order []int, setSize int, unitOfEndpoint []int, nUnits int) []unitClass {
	sets := len(order) / setSize
	perUnit := make([][]int, nUnits)
	for i := range perUnit {
		perUnit[i] = make([]int, sets)
	}
	for k, e := range order {
		perUnit[unitOfEndpoint[e]][k/setSize]++
	}
	index := map[string]int{}
	var out []unitClass
	for _, row := range perUnit {
		key := fmt.Sprint(row)
		if i, ok := index[key]; ok {
			out[i].size++
			continue
		}
		index[key] = len(out)
		out = append(out, unitClass{perSet: row, size: 1})
	}
	return out
}

// violates reports whether failing some `t` units leaves a set with more
// than `allowance` drives lost. It enumerates how many units of each class
// fail: every subset of units is equivalent to one such choice.
func violates(classes []unitClass, t, allowance int) bool {
	if len(classes) == 0 {
		return false
	}
	sets := len(classes[0].perSet)
	lost := make([]int, sets)
	var rec func(i, left int) bool
	rec = func(i, left int) bool {
		if i == len(classes) {
			if left > 0 {
				return false
			}
			for _, l := range lost {
				if l > allowance {
					return true
				}
			}
			return false
		}
		for n := 0; n <= min(left, classes[i].size); n++ {
			for s := range sets {
				lost[s] += n * classes[i].perSet[s]
			}
			hit := rec(i+1, left-n)
			for s := range sets {
				lost[s] -= n * classes[i].perSet[s]
			}
			if hit {
				return true
			}
		}
		return false
	}
	return rec(0, t)
}

func checkAccepted(t *testing.T, name string, c propCase, p Plan) {
	t.Helper()
	req := required(&c.spec)
	if p.Write.Drives < req.Drives || p.Write.Servers < req.Servers || p.Write.Domains < req.Domains {
		t.Fatalf("%s: accepted with write tolerance %+v below %+v", name, p.Write, req)
	}
	if req.Domains < 1 {
		return
	}
	// No set has more than parity drives in one failure domain (for spread
	// domains: in the servers one domain may hold).
	u := unitsOf(c)
	sets := len(p.Layout.DriveOrder) / p.Layout.SetSize
	for set := range sets {
		perDomain := map[int]int{}
		perServer := make([]int, u.servers)
		for k := set * p.Layout.SetSize; k < (set+1)*p.Layout.SetSize; k++ {
			e := p.Layout.DriveOrder[k]
			perServer[u.server[e]]++
			if u.domains > 0 {
				perDomain[u.domain[e]]++
			}
		}
		worst := 0
		if u.domains > 0 {
			for _, n := range perDomain {
				worst = max(worst, n)
			}
		} else {
			Z := spreadDomains(c)
			slices.Sort(perServer)
			slices.Reverse(perServer)
			most := (u.servers + Z - 1) / Z
			for _, n := range perServer[:most] {
				worst += n
			}
		}
		if worst > p.Layout.Parity {
			t.Fatalf("%s: set %d has %d drives in one failure domain, parity %d", name, set, worst, p.Layout.Parity)
		}
	}
}

// checkImpossible proves a tolerance refusal: for every set size and parity
// the spec allows, even the most even spread of a set over servers and
// domains loses more than write quorum allows.
func checkImpossible(t *testing.T, name string, c propCase, p Plan) {
	t.Helper()
	s := c.spec
	S, total := int(s.Servers), int(s.Servers*s.VolumesPerServer)
	req := required(&s)
	sizes := []int{int(s.Erasure.SetSize)}
	if s.Erasure.SetSize == 0 {
		sizes = nil
		for n := 2; n <= min(16, total); n++ {
			if total%n == 0 {
				sizes = append(sizes, n)
			}
		}
	}
	for _, n := range sizes {
		par := int(s.Erasure.Parity)
		if par == 0 {
			par = MediaDefaultParity(s.Storage.Media, n)
		}
		if par < 1 || par > n/2 {
			continue
		}
		wa := writeQuorumAllowance(n, par)
		possible := wa >= req.Drives &&
			evenTop(n, S, req.Servers) <= wa
		if D := len(s.Topology.Domains); D > 0 {
			possible = possible && evenTop(n, D, req.Domains) <= wa
		} else {
			Z := spreadDomains(c)
			q, r := S/Z, S%Z
			possible = possible && evenTop(n, S, req.Domains*q+min(req.Domains, r)) <= wa
		}
		if possible {
			t.Fatalf("%s: refused (%s), but set size %d with parity %d could meet tolerate %+v",
				name, p.Problems[0].Message, n, par, req)
		}
	}
	if !strings.Contains(p.Problems[0].Message, "spec.topology.tolerate") {
		t.Fatalf("%s: refusal does not name what to change: %s", name, p.Problems[0].Message)
	}
}

// evenTop is the fewest drives the k heaviest of `units` units can hold
// of a set of n: the set spread as evenly as possible.
func evenTop(n, units, k int) int {
	if k <= 0 {
		return 0
	}
	return k*(n/units) + min(k, n%units)
}

// checkNodesLacking verifies a NoMatchingNodes refusal from the nodes.
func checkNodesLacking(t *testing.T, name string, c propCase) {
	t.Helper()
	s := c.spec
	key := s.Topology.FailureDomainKey
	local := s.Storage.Media == v1.MediaLocalNVMe
	if D := len(s.Topology.Domains); D > 0 {
		per := map[string]int{}
		for _, n := range c.nodes {
			per[n.Labels[key]]++
		}
		for _, d := range s.Topology.Domains {
			if per[d.Name] == 0 || (local && per[d.Name] < int(s.Servers)/D) {
				return
			}
		}
		t.Fatalf("%s: refused for nodes, but every domain has enough", name)
	}
	if local && len(c.nodes) < int(s.Servers) {
		return
	}
	t.Fatalf("%s: refused for nodes with %d nodes", name, len(c.nodes))
}
