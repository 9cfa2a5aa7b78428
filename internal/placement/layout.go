package placement

import (
	"fmt"
	"slices"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// shape is a pool reduced to what the layout math needs.
type shape struct {
	servers, volumes int
	media            v1.Media

	// explicit: servers belong to spec.topology.domains, perDomain each,
	// in spec order (server s is in domain s/perDomain). Otherwise the
	// scheduler spreads servers over `domains` domains and which server
	// lands where is not known in advance.
	explicit  bool
	domains   int
	perDomain int

	// backendOf[v] is the storage backend (enclosure, array) of drive index
	// v; nil when backends are not failure units (LocalNVMe).
	backendOf []int
	backends  int
}

func newShape(spec *v1.ServerPoolSpec) *shape {
	sh := &shape{
		servers: int(spec.Servers),
		volumes: int(spec.VolumesPerServer),
		media:   spec.Storage.Media,
	}
	if n := len(spec.Topology.Domains); n > 0 {
		sh.explicit = true
		sh.domains = n
		sh.perDomain = max(1, sh.servers/n)
	}
	if sh.media != v1.MediaLocalNVMe {
		// Each distinct class is one enclosure or array; drive index v uses
		// class v mod n.
		// Classes no drive index reaches (more classes than drives per
		// server) hold nothing and are not counted.
		names := spec.Storage.StorageClassNames
		if len(names) > 0 {
			ids := map[string]int{}
			sh.backendOf = make([]int, sh.volumes)
			for v := range sh.backendOf {
				name := names[v%len(names)]
				if _, ok := ids[name]; !ok {
					ids[name] = len(ids)
				}
				sh.backendOf[v] = ids[name]
			}
			sh.backends = len(ids)
		}
	}
	return sh
}

func (sh *shape) drives() int { return sh.servers * sh.volumes }

// serverAt maps a position in a round of the drive order to a server.
// Consecutive positions walk the domains round robin (domain varies
// fastest), so consecutive slots of a set land in different domains.
func (sh *shape) serverAt(p int) int {
	if !sh.explicit {
		return p
	}
	return (p%sh.domains)*sh.perDomain + p/sh.domains
}

// order builds the drive order for a set size. It takes one drive from every
// server per round (servers in domain-round-robin order), so every window of
// `servers` consecutive slots holds each server once: a set of n drives gets
// n/servers or one more from each server and, for explicit domains, n/domains
// or one more from each domain: the most even spread there is. Which drive
// of a server a slot takes only matters for backends (enclosures, arrays):
// two candidate rules are tried and the one that spreads sets over backends
// better is kept (see backendOrder).
func (sh *shape) order(setSize int) []int {
	S, V := sh.servers, sh.volumes
	if sh.backendOf == nil || sh.backends <= 1 {
		out := make([]int, 0, S*V)
		for r := range V {
			for p := range S {
				out = append(out, sh.serverAt(p)*V+r)
			}
		}
		return out
	}
	greedy, diagonal := sh.greedyOrder(setSize), sh.diagonalOrder()
	if sh.backendLoad(diagonal, setSize).less(sh.backendLoad(greedy, setSize)) {
		return diagonal
	}
	return greedy
}

// greedyOrder: within a server, take the drive whose backend the current set
// holds least of.
func (sh *shape) greedyOrder(setSize int) []int {
	S, V, B := sh.servers, sh.volumes, sh.backends
	out := make([]int, 0, S*V)
	// free[s][b] lists server s's unused drive indices on backend b.
	free := make([][][]int, S)
	for s := range free {
		free[s] = make([][]int, B)
		for v := range V {
			b := sh.backendOf[v]
			free[s][b] = append(free[s][b], v)
		}
	}
	inSet := make([]int, B)
	for range V {
		for p := range S {
			k := len(out)
			if setSize > 0 && k%setSize == 0 {
				clear(inSet)
			}
			s := sh.serverAt(p)
			best := -1
			for i := range B {
				b := (k + i) % B // prefer the backend the slot index points at
				if len(free[s][b]) == 0 {
					continue
				}
				if best < 0 || inSet[b] < inSet[best] {
					best = b
				}
			}
			v := free[s][best][0]
			free[s][best] = free[s][best][1:]
			inSet[best]++
			out = append(out, s*V+v)
		}
	}
	return out
}

// diagonalOrder: in round r the server at position p takes drive
// (r+p) mod V, so a round sees consecutive drive indices across servers, and
// backends in proportion to their size (a circulant layout).
func (sh *shape) diagonalOrder() []int {
	S, V := sh.servers, sh.volumes
	out := make([]int, 0, S*V)
	for r := range V {
		for p := range S {
			out = append(out, sh.serverAt(p)*V+(r+p)%V)
		}
	}
	return out
}

// load is, for t = 1..backends, the most drives any set keeps on its t
// fullest backends: what losing t backends costs the worst set.
type load []int

func (a load) less(b load) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func (sh *shape) backendLoad(order []int, setSize int) load {
	out := make(load, sh.backends)
	if setSize <= 0 {
		return out
	}
	counts := make([]int, sh.backends)
	for start := 0; start+setSize <= len(order); start += setSize {
		clear(counts)
		for _, e := range order[start : start+setSize] {
			counts[sh.backendOf[e%sh.volumes]]++
		}
		slices.Sort(counts)
		slices.Reverse(counts)
		sum := 0
		for t, c := range counts {
			sum += c
			out[t] = max(out[t], sum)
		}
	}
	return out
}

// evaluated is one candidate layout with its drive order and tolerance.
type evaluated struct {
	setSize, parity int
	order           []int
	read, write     Tolerance
}

// writeAllowance is how many drives of a set may be lost with writes still
// working: write quorum is the data shard count, one more when data equals
// parity (so two halves can never both accept a write).
func writeAllowance(setSize, parity int) int {
	if setSize-parity == parity {
		return parity - 1
	}
	return parity
}

func (sh *shape) evaluate(setSize, parity int) evaluated {
	e := evaluated{setSize: setSize, parity: parity}
	if setSize <= 0 || sh.drives()%setSize != 0 {
		return e
	}
	e.order = sh.order(setSize)
	c := sh.count(e.order, setSize)
	e.read = c.tolerance(sh, parity)
	e.write = c.tolerance(sh, writeAllowance(setSize, parity))
	return e
}

// candidates lists the (set size, parity) pairs the spec allows, in order of
// preference: set sizes that stripe evenly over the servers first, larger
// sets first (more drives may fail, less parity overhead), each with the
// spec's parity or the media default.
func (sh *shape) candidates(spec *v1.ServerPoolSpec) []Erasure {
	var sizes []int
	if n := int(spec.Erasure.SetSize); n > 0 {
		sizes = []int{n}
	} else {
		sizes = setSizes(sh.drives(), sh.servers)
	}
	var out []Erasure
	for _, n := range sizes {
		p := int(spec.Erasure.Parity)
		if p == 0 {
			p = MediaDefaultParity(sh.media, n)
		}
		if p < 1 || p > n/2 {
			continue
		}
		out = append(out, Erasure{SetSize: n, Parity: p})
	}
	return out
}

// setSizes lists divisors of drives in 2..16, those that stripe evenly over
// the servers (a multiple or a divisor of the server count) first, each
// group largest first.
func setSizes(drives, servers int) []int {
	var even, other []int
	for n := min(16, drives); n >= 2; n-- {
		if drives%n != 0 {
			continue
		}
		if n%servers == 0 || servers%n == 0 {
			even = append(even, n)
		} else {
			other = append(other, n)
		}
	}
	return append(even, other...)
}

// choose returns the first candidate whose write tolerance meets req; when
// none does, the first candidate (what the pool would get) and false.
func (sh *shape) choose(spec *v1.ServerPoolSpec, req Tolerance) (evaluated, bool) {
	cands := sh.candidates(spec)
	if len(cands) == 0 {
		return evaluated{}, false
	}
	var first evaluated
	for i, c := range cands {
		e := sh.evaluate(c.SetSize, c.Parity)
		if i == 0 {
			first = e
		}
		if meets(e.write, req) {
			return e, true
		}
	}
	return first, false
}

// refusal explains why no candidate meets req and what would.
func (sh *shape) refusal(spec *v1.ServerPoolSpec, req Tolerance, got evaluated) Problem {
	ask := fmt.Sprintf("spec.topology.tolerate asks for %d domain(s), %d server(s), %d drive(s)", req.Domains, req.Servers, req.Drives)
	if got.setSize == 0 {
		return Problem{Reason: v1.ReasonToleranceUnreachable, Message: fmt.Sprintf(
			"no erasure layout fits: erasure {setSize: %d, parity: %d} is not possible for %d drives (set size 2-16 dividing the drive count, parity at most half the set)",
			spec.Erasure.SetSize, spec.Erasure.Parity, sh.drives())}
	}
	what := fmt.Sprintf("%s with writes working, but erasure sets of %d drives with parity %d over %s survive only %d domain(s), %d server(s), %d drive(s)",
		ask, got.setSize, got.parity, sh.describeDomains(), got.write.Domains, got.write.Servers, got.write.Drives)
	if got.write.HasBackends {
		what += fmt.Sprintf(", %d of %d backend(s)", got.write.Backends, sh.backends)
	}

	// Would another layout do? Search every set size and parity, most
	// space-efficient first.
	if alt, ok := sh.bestAlternative(req); ok {
		return Problem{Reason: v1.ReasonToleranceUnreachable, Message: fmt.Sprintf(
			"%s. erasure {setSize: %d, parity: %d} would meet it (erasure is immutable: delete and re-create the pool with it; nothing was created for this pool), or lower spec.topology.tolerate",
			what, alt.SetSize, alt.Parity)}
	}
	return Problem{Reason: v1.ReasonToleranceUnreachable, Message: fmt.Sprintf(
		"%s. No erasure layout of %d servers x %d drives survives that: spread the servers over more failure domains (more nodes or domains) or lower spec.topology.tolerate",
		what, sh.servers, sh.volumes)}
}

func (sh *shape) describeDomains() string {
	if sh.explicit {
		return fmt.Sprintf("%d explicit domains of %d server(s)", sh.domains, sh.perDomain)
	}
	return fmt.Sprintf("%d failure domain(s) among the eligible nodes", sh.domains)
}

// bestAlternative finds the most space-efficient layout (then the largest
// set) of any set size and parity that meets req.
func (sh *shape) bestAlternative(req Tolerance) (Erasure, bool) {
	var best Erasure
	found := false
	for _, n := range setSizes(sh.drives(), sh.servers) {
		for p := 1; p <= n/2; p++ {
			if found && (n-p)*best.SetSize < (best.SetSize-best.Parity)*n {
				break // less efficient than what we have; more parity is worse still
			}
			e := sh.evaluate(n, p)
			if !meets(e.write, req) {
				continue
			}
			better := !found || (n-p)*best.SetSize > (best.SetSize-best.Parity)*n ||
				((n-p)*best.SetSize == (best.SetSize-best.Parity)*n && n > best.SetSize)
			if better {
				best, found = Erasure{SetSize: n, Parity: p}, true
			}
			break // the least parity that works is the best for this size
		}
	}
	return best, found
}

// counts holds, per erasure set, how many of its drives each server, domain
// and backend holds.
type counts struct {
	sets                 int
	perServer, perDomain [][]int
	perBackend           [][]int
}

func (sh *shape) count(order []int, setSize int) *counts {
	sets := len(order) / setSize
	c := &counts{sets: sets}
	c.perServer = grid(sets, sh.servers)
	if sh.explicit {
		c.perDomain = grid(sets, sh.domains)
	}
	if sh.backendOf != nil {
		c.perBackend = grid(sets, sh.backends)
	}
	for k, e := range order {
		set, s, v := k/setSize, e/sh.volumes, e%sh.volumes
		c.perServer[set][s]++
		if sh.explicit {
			c.perDomain[set][s/sh.perDomain]++
		}
		if sh.backendOf != nil {
			c.perBackend[set][sh.backendOf[v]]++
		}
	}
	return c
}

func grid(rows, cols int) [][]int {
	cells := make([]int, rows*cols)
	out := make([][]int, rows)
	for i := range out {
		out[i] = cells[i*cols : (i+1)*cols]
	}
	return out
}

// tolerance is, for each kind of unit, the largest number of units whose
// loss leaves every set with at most `allowance` drives lost. The worst t
// units for a set are the t holding most of its drives.
func (c *counts) tolerance(sh *shape, allowance int) Tolerance {
	t := Tolerance{Drives: allowance}
	t.Servers = minOverSets(c.perServer, allowance)
	if sh.explicit {
		t.Domains = minOverSets(c.perDomain, allowance)
	} else {
		t.Domains = spreadDomainTolerance(sh.servers, sh.domains, t.Servers)
	}
	if c.perBackend != nil {
		t.HasBackends = true
		t.Backends = minOverSets(c.perBackend, allowance)
	}
	return t
}

// minOverSets: for each set, how many of its heaviest units fit in the
// allowance; the minimum over sets.
func minOverSets(perSet [][]int, allowance int) int {
	tol := -1
	buf := []int(nil)
	for _, row := range perSet {
		buf = append(buf[:0], row...)
		slices.Sort(buf)
		lost, m := 0, 0
		for i := len(buf) - 1; i >= 0; i-- {
			if lost+buf[i] > allowance {
				break
			}
			lost += buf[i]
			m++
		}
		if tol < 0 || m < tol {
			tol = m
		}
	}
	return max(tol, 0)
}

// spreadDomainTolerance: servers are spread by the scheduler over `domains`
// domains with maxSkew 1, so a domain holds servers/domains or one more,
// and any server may be in any domain. Losing t domains loses at most
// mostServers(t) servers, and they may be any servers: the pool survives t
// domains exactly when it survives that many servers.
func spreadDomainTolerance(servers, domains, serverTol int) int {
	if domains <= 0 {
		return 0
	}
	t := 0
	for t+1 < domains && mostServers(servers, domains, t+1) <= serverTol {
		t++
	}
	return t
}

// mostServers is the most servers t of `domains` domains can hold when
// `servers` servers are spread with maxSkew 1.
func mostServers(servers, domains, t int) int {
	q, r := servers/domains, servers%domains
	return t*q + min(t, r)
}
