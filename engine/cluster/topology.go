package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/erasure"
)

// Endpoint is one drive of a deployment: a directory on a node.
type Endpoint struct {
	// Raw is the endpoint as written (after ellipses expansion).
	Raw string
	// Host is the node's S3 address, host:port; empty for a bare local path.
	Host string
	// Path is the drive directory on that node.
	Path string
	// TLS: the node speaks https.
	TLS bool
	// Local: the drive is on this node.
	Local bool
}

// ParseEndpoint parses "scheme://host:port/path" or a local path.
func ParseEndpoint(raw string) (Endpoint, error) {
	if !strings.Contains(raw, "://") {
		if !strings.HasPrefix(raw, "/") {
			return Endpoint{}, fmt.Errorf("endpoint %q: a drive path must be absolute", raw)
		}
		return Endpoint{Raw: raw, Path: raw, Local: true}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Endpoint{}, fmt.Errorf("endpoint %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Endpoint{}, fmt.Errorf("endpoint %q: scheme must be http or https", raw)
	}
	if u.Port() == "" {
		return Endpoint{}, fmt.Errorf("endpoint %q: give the port (host:port)", raw)
	}
	if u.Path == "" || u.Path == "/" {
		return Endpoint{}, fmt.Errorf("endpoint %q: give the drive path after the host", raw)
	}
	return Endpoint{Raw: raw, Host: u.Host, Path: u.Path, TLS: u.Scheme == "https"}, nil
}

// Locality decides which hosts are this node.
type Locality struct {
	// Address is what the server listens on (host:port, host may be empty).
	Address string
	// LocalIPs are this node's interface addresses; nil: looked up.
	LocalIPs []net.IP
	// Resolve resolves a host name; nil: net.LookupIP.
	Resolve func(host string) ([]net.IP, error)
	// ResolveWait is how long a name that does not resolve (a DNS error)
	// is retried before giving up: in Kubernetes a peer's name resolves
	// only once its pod has an address, and pods start together.
	ResolveWait time.Duration
	// Logf, when set, says once per name that it is being waited for.
	Logf func(format string, args ...any)
}

// lookup resolves h, retrying DNS errors for up to ResolveWait.
func (l Locality) lookup(h string) ([]net.IP, error) {
	resolve := l.Resolve
	if resolve == nil {
		resolve = net.LookupIP
	}
	deadline := time.Now().Add(l.ResolveWait)
	delay := 200 * time.Millisecond
	for waited := false; ; waited = true {
		ips, err := resolve(h)
		var dnsErr *net.DNSError
		if err == nil || !errors.As(err, &dnsErr) || time.Now().Add(delay).After(deadline) {
			return ips, err
		}
		if !waited && l.Logf != nil {
			l.Logf("waiting up to %s for %s to resolve: %v", time.Until(deadline).Round(time.Second), h, err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 5*time.Second)
	}
}

// IsLocal reports whether host (host:port) is this node: the listen
// address itself, or a host resolving to one of this node's interface
// addresses with the listen port (the rule of docs/topology.md).
func (l Locality) IsLocal(host string) (bool, error) {
	if host == l.Address {
		return true, nil
	}
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return false, err
	}
	lh, lport, err := net.SplitHostPort(l.Address)
	if err != nil {
		return false, err
	}
	if port != lport {
		return false, nil
	}
	ips, err := l.lookup(h)
	if err != nil {
		return false, fmt.Errorf("resolving %s: %w", h, err)
	}
	if lh != "" && lh != "0.0.0.0" && lh != "::" {
		// Bound to one address: only that address is this node.
		lips, err := l.lookup(lh)
		if err != nil {
			return false, err
		}
		return overlaps(ips, lips), nil
	}
	local := l.LocalIPs
	if local == nil {
		local = interfaceIPs()
	}
	return overlaps(ips, local), nil
}

func overlaps(a, b []net.IP) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Equal(y) {
				return true
			}
		}
	}
	return false
}

func interfaceIPs() []net.IP {
	addrs, _ := net.InterfaceAddrs()
	var out []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP)
		}
	}
	return out
}

// Pool states of the topology file.
const (
	PoolActive         = "Active"
	PoolDraining       = "Draining"
	PoolDecommissioned = "Decommissioned"
)

// TopologyVersion is the topology file format this build reads.
const TopologyVersion = 1

// PoolSpec is one pool of the topology.
type PoolSpec struct {
	Name       string   `json:"name"`
	Endpoints  []string `json:"endpoints"`
	SetSize    int      `json:"setSize,omitempty"`
	Parity     int      `json:"parity,omitempty"`
	DriveOrder []int    `json:"driveOrder,omitempty"`
	State      string   `json:"state,omitempty"`
}

// Topology is the pool list of a deployment (docs/topology.md).
type Topology struct {
	Version      int        `json:"version"`
	DeploymentID string     `json:"deploymentID,omitempty"`
	Pools        []PoolSpec `json:"pools"`
}

// ParseTopology decodes and checks a topology file.
func ParseTopology(data []byte) (Topology, error) {
	var t Topology
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Topology{}, fmt.Errorf("topology: %w", err)
	}
	if t.Version != TopologyVersion {
		return Topology{}, fmt.Errorf("topology: version %d, this build reads version %d", t.Version, TopologyVersion)
	}
	if t.DeploymentID != "" {
		if _, err := uuid.Parse(t.DeploymentID); err != nil {
			return Topology{}, fmt.Errorf("topology: deploymentID %q is not a UUID", t.DeploymentID)
		}
	}
	if len(t.Pools) == 0 {
		return Topology{}, fmt.Errorf("topology: no pools")
	}
	names := map[string]bool{}
	for i := range t.Pools {
		p := &t.Pools[i]
		if p.Name == "" {
			return Topology{}, fmt.Errorf("topology: pool %d has no name", i)
		}
		if names[p.Name] {
			return Topology{}, fmt.Errorf("topology: pool name %q listed twice", p.Name)
		}
		names[p.Name] = true
		switch p.State {
		case "":
			p.State = PoolActive
		case PoolActive, PoolDraining, PoolDecommissioned:
		default:
			return Topology{}, fmt.Errorf("topology: pool %s: state %q is not Active, Draining or Decommissioned", p.Name, p.State)
		}
	}
	return t, nil
}

// PoolLayout is a pool resolved: its drives in slot order (set s, position
// i is Drives[s*SetSize+i]), grouped into sets.
type PoolLayout struct {
	Name    string
	State   string
	SetSize int
	Parity  int
	Sets    int
	// Drives in slot order.
	Drives []Endpoint
	// Servers is the number of distinct nodes.
	Servers int
}

// Layout expands a pool's endpoints, checks them and orders its drives
// into slots: by driveOrder when given, else host-major striping (drive 0
// of every server, then drive 1 of every server...), so each set spreads
// over as many servers as it can.
func (p PoolSpec) Layout(loc Locality) (PoolLayout, error) {
	raw, err := ExpandAll(p.Endpoints)
	if err != nil {
		return PoolLayout{}, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	if len(raw) == 0 {
		// (a fuzz-found panic: a division by the number of servers)
		return PoolLayout{}, fmt.Errorf("pool %s has no endpoints", p.Name)
	}
	eps := make([]Endpoint, len(raw))
	var hosts []string
	perHost := map[string][]int{}
	seen := map[string]bool{}
	for i, r := range raw {
		ep, err := ParseEndpoint(r)
		if err != nil {
			return PoolLayout{}, fmt.Errorf("pool %s: %w", p.Name, err)
		}
		if seen[ep.Host+ep.Path] {
			return PoolLayout{}, fmt.Errorf("pool %s: endpoint %s listed twice", p.Name, r)
		}
		seen[ep.Host+ep.Path] = true
		if ep.Host != "" {
			if ep.Local, err = loc.IsLocal(ep.Host); err != nil {
				return PoolLayout{}, fmt.Errorf("pool %s: endpoint %s: %w", p.Name, r, err)
			}
		}
		eps[i] = ep
		if _, ok := perHost[ep.Host]; !ok {
			hosts = append(hosts, ep.Host)
		}
		perHost[ep.Host] = append(perHost[ep.Host], i)
	}
	if len(hosts) > 1 && slices.Contains(hosts, "") {
		return PoolLayout{}, fmt.Errorf("pool %s: mixes bare paths with host endpoints; give every drive as scheme://host:port/path", p.Name)
	}
	n := len(hosts)
	per := len(eps) / n
	for h, idx := range perHost {
		if len(idx) != per {
			return PoolLayout{}, fmt.Errorf("pool %s: server %s has %d drives, others %d: every server needs the same number", p.Name, h, len(idx), per)
		}
	}
	setSize := p.SetSize
	if setSize == 0 {
		if setSize, err = erasure.SetSize(len(eps), n); err != nil {
			return PoolLayout{}, fmt.Errorf("pool %s: %w", p.Name, err)
		}
	} else if setSize < erasure.MinSetSize || setSize > erasure.MaxSetSize || len(eps)%setSize != 0 {
		return PoolLayout{}, fmt.Errorf("pool %s: setSize %d must be in 2..16 and divide its %d drives", p.Name, setSize, len(eps))
	}
	parity := p.Parity
	if parity == 0 {
		parity = erasure.DefaultParity(setSize)
	}
	if _, err := erasure.NewLayout(setSize, parity); err != nil {
		return PoolLayout{}, fmt.Errorf("pool %s: %w", p.Name, err)
	}
	order := p.DriveOrder
	if len(order) == 0 {
		for d := 0; d < per; d++ {
			for _, h := range hosts {
				order = append(order, perHost[h][d])
			}
		}
	} else {
		if len(order) != len(eps) {
			return PoolLayout{}, fmt.Errorf("pool %s: driveOrder has %d entries for %d drives", p.Name, len(order), len(eps))
		}
		sorted := slices.Sorted(slices.Values(order))
		for i, v := range sorted {
			if v != i {
				return PoolLayout{}, fmt.Errorf("pool %s: driveOrder must be a permutation of 0..%d", p.Name, len(eps)-1)
			}
		}
	}
	l := PoolLayout{Name: p.Name, State: p.State, SetSize: setSize, Parity: parity, Sets: len(eps) / setSize, Servers: n}
	for _, i := range order {
		l.Drives = append(l.Drives, eps[i])
	}
	return l, nil
}

// SameLayout reports whether two layouts of one pool put the same drives in
// the same slots with the same erasure shape (a pool cannot change shape
// once formatted).
func (l PoolLayout) SameLayout(o PoolLayout) error {
	if l.SetSize != o.SetSize || l.Parity != o.Parity || len(l.Drives) != len(o.Drives) {
		return fmt.Errorf("pool %s: layout changed from %d drives in sets of %d+%d to %d drives in sets of %d+%d; a pool's layout cannot change, add a pool instead",
			l.Name, len(l.Drives), l.SetSize-l.Parity, l.Parity, len(o.Drives), o.SetSize-o.Parity, o.Parity)
	}
	for i := range l.Drives {
		if l.Drives[i].Host != o.Drives[i].Host || l.Drives[i].Path != o.Drives[i].Path {
			return fmt.Errorf("pool %s: slot %d moved from %s to %s; a pool's drives cannot be reordered", l.Name, i, l.Drives[i].Raw, o.Drives[i].Raw)
		}
	}
	return nil
}

// Hosts lists the pool's nodes in slot order of first appearance.
func (l PoolLayout) Hosts() []string {
	var out []string
	for _, d := range l.Drives {
		if !slices.Contains(out, d.Host) {
			out = append(out, d.Host)
		}
	}
	return out
}

// String describes the layout.
func (l PoolLayout) String() string {
	return l.Name + ": " + strconv.Itoa(l.Sets) + " sets of " + strconv.Itoa(l.SetSize-l.Parity) + "+" + strconv.Itoa(l.Parity) +
		" over " + strconv.Itoa(l.Servers) + " servers"
}

// TopologyFromArgs builds a topology from command-line endpoints. When the
// arguments use {a...b} ranges each argument is one pool; otherwise all of
// them together are one pool (so "d1 d2 d3 d4" is one pool of four drives).
func TopologyFromArgs(args []string, parity int) Topology {
	t := Topology{Version: TopologyVersion}
	ranged := slices.ContainsFunc(args, func(a string) bool { return ellipsis.MatchString(a) })
	if !ranged {
		t.Pools = []PoolSpec{{Name: "pool-0", Endpoints: args, Parity: parity, State: PoolActive}}
		return t
	}
	for i, a := range args {
		t.Pools = append(t.Pools, PoolSpec{Name: fmt.Sprintf("pool-%d", i), Endpoints: []string{a}, Parity: parity, State: PoolActive})
	}
	return t
}
