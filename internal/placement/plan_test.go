package placement

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

func TestComputeLayouts(t *testing.T) {
	cases := []struct {
		name        string
		spec        v1.ServerPoolSpec
		facts       Facts
		setSize     int
		parity      int
		write, read Tolerance
		domains     int
	}{{
		// docs/placement.md, example 1.
		name:    "LocalNVMe 4 nodes x 4 drives: one set of 16, parity 4, survives a node",
		spec:    pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme"}),
		facts:   Facts{Nodes: nodes(4), StorageClasses: wffc("nvme")},
		setSize: 16, parity: 4, domains: 4,
		write: Tolerance{Drives: 4, Servers: 1, Domains: 1},
		read:  Tolerance{Drives: 4, Servers: 1, Domains: 1},
	}, {
		// docs/placement.md, example 3: parity 1 on protected LUNs needs
		// sets of at most one drive per server.
		name:    "ArrayLUN 4 servers x 4 LUNs from two arrays: sets of 4, parity 1",
		spec:    pool(v1.MediaArrayLUN, 4, 4, []string{"array-a", "array-b"}),
		facts:   Facts{Nodes: nodes(6), StorageClasses: wffc("array-a", "array-b")},
		setSize: 4, parity: 1, domains: 4,
		write: Tolerance{Drives: 1, Servers: 1, Domains: 1, HasBackends: true},
		read:  Tolerance{Drives: 1, Servers: 1, Domains: 1, HasBackends: true},
	}, {
		// docs/placement.md, example 2.
		name:    "NVMeoF 6 servers x 4 namespaces over two enclosures: sets of 12, parity 3",
		spec:    pool(v1.MediaNVMeoF, 6, 4, []string{"enc-a", "enc-b"}),
		facts:   Facts{Nodes: nodes(6), StorageClasses: wffc("enc-a", "enc-b")},
		setSize: 12, parity: 3, domains: 6,
		write: Tolerance{Drives: 3, Servers: 1, Domains: 1, HasBackends: true},
		read:  Tolerance{Drives: 3, Servers: 1, Domains: 1, HasBackends: true},
	}, {
		name:    "NVMeoF over three enclosures survives one: sets of 12, 4 per enclosure",
		spec:    pool(v1.MediaNVMeoF, 6, 6, []string{"enc-a", "enc-b", "enc-c"}, erasure(12, 4)),
		facts:   Facts{Nodes: nodes(6), StorageClasses: wffc("enc-a", "enc-b", "enc-c")},
		setSize: 12, parity: 4, domains: 6,
		write: Tolerance{Drives: 4, Servers: 2, Domains: 2, Backends: 1, HasBackends: true},
		read:  Tolerance{Drives: 4, Servers: 2, Domains: 2, Backends: 1, HasBackends: true},
	}, {
		name:    "explicit racks: 3 racks x 2 servers x 2 drives, sets of 6 with 2 per rack",
		spec:    pool(v1.MediaNVMeoF, 6, 2, []string{"enc"}, domains(rackKey, "z0-r0", "z0-r1", "z0-r2")),
		facts:   Facts{Nodes: cluster(1, 3, 2), StorageClasses: wffc("enc")},
		setSize: 6, parity: 2, domains: 3,
		write: Tolerance{Drives: 2, Servers: 2, Domains: 1, HasBackends: true},
		read:  Tolerance{Drives: 2, Servers: 2, Domains: 1, HasBackends: true},
	}, {
		name:    "spread over zones, worst case: 4 servers over 3 zones count as losing 2 servers per zone",
		spec:    pool(v1.MediaNVMeoF, 4, 4, []string{"enc"}, domainKey(zoneKey), tolerate(0, 1, 0)),
		facts:   Facts{Nodes: cluster(3, 1, 2), StorageClasses: wffc("enc")},
		setSize: 16, parity: 4, domains: 3,
		write: Tolerance{Drives: 4, Servers: 1, Domains: 0, HasBackends: true},
		read:  Tolerance{Drives: 4, Servers: 1, Domains: 0, HasBackends: true},
	}, {
		// Backends of unequal size (drives 0,3 -> a; 1,4 -> b; 2 -> c): only
		// the circulant order gives every set 2+2+1 and so survives losing
		// any one backend.
		name:    "NVMeoF with three enclosures of unequal size: the circulant order survives one",
		spec:    pool(v1.MediaNVMeoF, 5, 5, []string{"enc-a", "enc-b", "enc-c"}, erasure(5, 2)),
		facts:   Facts{Nodes: nodes(5), StorageClasses: wffc("enc-a", "enc-b", "enc-c")},
		setSize: 5, parity: 2, domains: 5,
		write: Tolerance{Drives: 2, Servers: 2, Domains: 2, Backends: 1, HasBackends: true},
		read:  Tolerance{Drives: 2, Servers: 2, Domains: 2, Backends: 1, HasBackends: true},
	}, {
		name:    "data equal to parity: writes need one more drive than reads",
		spec:    pool(v1.MediaLocalNVMe, 4, 1, []string{"nvme"}),
		facts:   Facts{Nodes: nodes(4), StorageClasses: wffc("nvme")},
		setSize: 4, parity: 2, domains: 4,
		write: Tolerance{Drives: 1, Servers: 1, Domains: 1},
		read:  Tolerance{Drives: 2, Servers: 2, Domains: 2},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := place(tc.spec, tc.facts)
			if !p.OK() {
				t.Fatalf("refused: %+v", p.Problems)
			}
			if p.Layout.SetSize != tc.setSize || p.Layout.Parity != tc.parity {
				t.Errorf("layout = %d/%d, want %d/%d", p.Layout.SetSize, p.Layout.Parity, tc.setSize, tc.parity)
			}
			if p.Layout.Sets*p.Layout.SetSize != int(tc.spec.Servers*tc.spec.VolumesPerServer) {
				t.Errorf("sets = %d do not cover the drives", p.Layout.Sets)
			}
			if p.Domains != tc.domains {
				t.Errorf("domains = %d, want %d", p.Domains, tc.domains)
			}
			if p.Write != tc.write {
				t.Errorf("write tolerance = %+v, want %+v", p.Write, tc.write)
			}
			if p.Read != tc.read {
				t.Errorf("read tolerance = %+v, want %+v", p.Read, tc.read)
			}
		})
	}
}

func TestSamplesGiveDifferentLayouts(t *testing.T) {
	// The LocalNVMe and ArrayLUN samples in config/samples, side by side.
	facts := Facts{Nodes: nodes(4), StorageClasses: wffc("nvme-local", "array-a-luns", "array-b-luns")}
	nvme := place(pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme-local"}), facts)
	array := place(pool(v1.MediaArrayLUN, 4, 4, []string{"array-a-luns", "array-b-luns"}), facts)
	if !nvme.OK() || !array.OK() {
		t.Fatalf("refused: %v %v", nvme.Problems, array.Problems)
	}
	if nvme.Layout.SetSize == array.Layout.SetSize && nvme.Layout.Parity == array.Layout.Parity {
		t.Fatalf("same layout %+v for both media", nvme.Layout)
	}
	if nvme.Write.Domains < 1 || array.Write.Domains < 1 {
		t.Fatalf("a sample does not survive a node: %+v %+v", nvme.Write, array.Write)
	}
}

func TestDriveOrderMatchesTopologyContract(t *testing.T) {
	// docs/topology.md shows this order for a 4 x 4 pool in one set of 16.
	got := DriveOrder(pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme"}), 16)
	want := []int{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}
	if !slices.Equal(got, want) {
		t.Fatalf("DriveOrder = %v, want %v", got, want)
	}
	// Explicit domains: consecutive slots alternate domains (servers 0-1 in
	// rack a, 2-3 in rack b).
	got = DriveOrder(pool(v1.MediaLocalNVMe, 4, 1, []string{"nvme"}, domains(rackKey, "a", "b")), 4)
	want = []int{0, 2, 1, 3}
	if !slices.Equal(got, want) {
		t.Fatalf("DriveOrder with domains = %v, want %v", got, want)
	}
	// Two enclosures: a set of 4 over 4 servers takes two drives from each.
	got = DriveOrder(pool(v1.MediaNVMeoF, 4, 2, []string{"a", "b"}), 4)
	want = []int{0, 3, 4, 7, 1, 2, 5, 6}
	if !slices.Equal(got, want) {
		t.Fatalf("DriveOrder over enclosures = %v, want %v", got, want)
	}
}

func TestRefusals(t *testing.T) {
	immediate := class("nvme", storagev1.VolumeBindingImmediate)
	noExpand := wffc("nvme")
	cases := []struct {
		name   string
		in     Input
		facts  Facts
		reason string
		says   []string
	}{{
		name:   "two nodes cannot keep write quorum through losing one",
		in:     Input{Spec: pool(v1.MediaLocalNVMe, 2, 2, []string{"nvme"})},
		facts:  Facts{Nodes: nodes(2), StorageClasses: wffc("nvme")},
		reason: v1.ReasonToleranceUnreachable,
		says:   []string{"asks for 1 domain(s)", "spread the servers over more failure domains"},
	}, {
		name:   "explicit parity too low for a node's share of the set",
		in:     Input{Spec: pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme"}, erasure(16, 2))},
		facts:  Facts{Nodes: nodes(4), StorageClasses: wffc("nvme")},
		reason: v1.ReasonToleranceUnreachable,
		says:   []string{"parity 2", "erasure {setSize: 16, parity: 4} would meet it"},
	}, {
		name:   "ArrayLUN asked to survive two servers suggests more parity",
		in:     Input{Spec: pool(v1.MediaArrayLUN, 6, 4, []string{"a"}, tolerate(2, 0, 0))},
		facts:  Facts{Nodes: nodes(6), StorageClasses: wffc("a")},
		reason: v1.ReasonToleranceUnreachable,
		says:   []string{"parity 1", "erasure {setSize: 12, parity: 4} would meet it"},
	}, {
		name:   "two explicit domains cannot keep write quorum through losing one",
		in:     Input{Spec: pool(v1.MediaNVMeoF, 4, 2, []string{"enc"}, domains(zoneKey, "z0", "z1"))},
		facts:  Facts{Nodes: cluster(2, 1, 2), StorageClasses: wffc("enc")},
		reason: v1.ReasonToleranceUnreachable,
		says:   []string{"2 explicit domains of 2 server(s)", "more failure domains"},
	}, {
		name:   "storage class missing",
		in:     Input{Spec: pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme"})},
		facts:  Facts{Nodes: nodes(4)},
		reason: v1.ReasonStorageClassMissing,
		says:   []string{`StorageClass "nvme" does not exist`},
	}, {
		name:   "local class that binds immediately",
		in:     Input{Spec: pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme"})},
		facts:  Facts{Nodes: nodes(4), StorageClasses: []storagev1.StorageClass{immediate}},
		reason: v1.ReasonBindingModeImmediate,
		says:   []string{"WaitForFirstConsumer"},
	}, {
		name:   "no node matches the node selector",
		in:     Input{Spec: pool(v1.MediaNVMeoF, 4, 4, []string{"nvme"}, nodeSelector("storage", "true"))},
		facts:  Facts{Nodes: nodes(4), StorageClasses: wffc("nvme")},
		reason: v1.ReasonNoMatchingNodes,
		says:   []string{"spec.nodeSelector storage=true"},
	}, {
		name:   "LocalNVMe needs a node per server",
		in:     Input{Spec: pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme"})},
		facts:  Facts{Nodes: nodes(3), StorageClasses: wffc("nvme")},
		reason: v1.ReasonNoMatchingNodes,
		says:   []string{"4 servers need 4 nodes, but only 3"},
	}, {
		name:   "explicit domain without nodes",
		in:     Input{Spec: pool(v1.MediaNVMeoF, 4, 4, []string{"nvme"}, domains(rackKey, "z0-r0", "z0-r9"))},
		facts:  Facts{Nodes: cluster(1, 2, 2), StorageClasses: wffc("nvme")},
		reason: v1.ReasonNoMatchingNodes,
		says:   []string{`domain "z0-r9"`},
	}, {
		name: "drive larger than CSIStorageCapacity reports",
		in:   Input{Spec: pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme"}, size("4Ti"))},
		facts: Facts{Nodes: nodes(4), StorageClasses: wffc("nvme"), Capacities: []storagev1.CSIStorageCapacity{{
			ObjectMeta:       metav1.ObjectMeta{Name: "c1"},
			StorageClassName: "nvme",
			NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{hostnameKey: "n0"}},
			Capacity:         ptr.To(resource.MustParse("3840Gi")),
		}}},
		reason: v1.ReasonInsufficientCapacity,
		says:   []string{"at most 3840Gi", "storage.size is 4Ti"},
	}, {
		name: "size grew on a class without expansion",
		in: Input{Spec: pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme"}, size("2Ti")),
			ProvisionedSize: ptr.To(resource.MustParse("1Ti")), Pinned: &Erasure{SetSize: 16, Parity: 4}},
		facts:  Facts{Nodes: nodes(4), StorageClasses: noExpand},
		reason: v1.ReasonExpansionNotAllowed,
		says:   []string{"does not allow volume expansion"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.PodLabels = podLabels
			p := Compute(tc.in, tc.facts)
			if p.OK() {
				t.Fatalf("accepted, want %s", tc.reason)
			}
			var found *Problem
			for i := range p.Problems {
				if p.Problems[i].Reason == tc.reason {
					found = &p.Problems[i]
				}
			}
			if found == nil {
				t.Fatalf("problems %+v lack reason %s", p.Problems, tc.reason)
			}
			for _, s := range tc.says {
				if !strings.Contains(found.Message, s) {
					t.Errorf("message %q does not say %q", found.Message, s)
				}
			}
		})
	}
}

func TestCapacityPassesWhenSomeSegmentFits(t *testing.T) {
	spec := pool(v1.MediaLocalNVMe, 4, 4, []string{"nvme"}, size("2Ti"))
	facts := Facts{Nodes: nodes(4), StorageClasses: wffc("nvme"), Capacities: []storagev1.CSIStorageCapacity{
		{StorageClassName: "nvme", Capacity: ptr.To(resource.MustParse("1Ti"))},
		{StorageClassName: "nvme", Capacity: ptr.To(resource.MustParse("8Ti")), MaximumVolumeSize: ptr.To(resource.MustParse("4Ti"))},
		{StorageClassName: "other", Capacity: ptr.To(resource.MustParse("1Gi"))},
	}}
	if p := place(spec, facts); !p.OK() {
		t.Fatalf("refused: %+v", p.Problems)
	}
}

func TestPinnedLayoutIsKept(t *testing.T) {
	// A pool created when 4 zones existed keeps its layout after one zone's
	// nodes leave; the tolerance is re-evaluated on today's nodes.
	spec := pool(v1.MediaNVMeoF, 4, 2, []string{"enc"}, domainKey(zoneKey))
	p := Compute(Input{Spec: spec, PodLabels: podLabels, Pinned: &Erasure{SetSize: 4, Parity: 1}},
		Facts{Nodes: cluster(2, 1, 2), StorageClasses: wffc("enc")})
	if p.Layout.SetSize != 4 || p.Layout.Parity != 1 {
		t.Fatalf("layout = %+v, want the pinned 4/1", p.Layout)
	}
	if p.Write.Domains != 0 {
		t.Fatalf("2 servers per zone with parity 1 cannot lose a zone; got %+v", p.Write)
	}
}

func TestGroupsAndClaims(t *testing.T) {
	t.Run("LocalNVMe: one StatefulSet, one server per node, no spread", func(t *testing.T) {
		p := place(pool(v1.MediaLocalNVMe, 4, 3, []string{"a", "b"}), Facts{Nodes: nodes(4), StorageClasses: wffc("a", "b")})
		if len(p.Groups) != 1 || p.Groups[0].Replicas != 4 || p.Groups[0].Suffix != "" {
			t.Fatalf("groups = %+v", p.Groups)
		}
		g := p.Groups[0]
		if g.Affinity == nil || g.Affinity.PodAntiAffinity == nil ||
			g.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != hostnameKey {
			t.Fatalf("no required hostname anti-affinity: %+v", g.Affinity)
		}
		if len(g.TopologySpreadConstraints) != 0 {
			t.Fatalf("unexpected spread: %+v", g.TopologySpreadConstraints)
		}
		want := []Claim{{"data0", "a"}, {"data1", "b"}, {"data2", "a"}}
		if !slices.Equal(p.Claims, want) {
			t.Fatalf("claims = %+v, want %+v", p.Claims, want)
		}
	})
	t.Run("explicit domains: one StatefulSet per domain pinned by node affinity", func(t *testing.T) {
		spec := pool(v1.MediaNVMeoF, 4, 2, []string{"enc"}, domains(zoneKey, "z0", "zone-1"), tolerate(0, 1, 0))
		spec.Topology.Domains[1].Value = "z1"
		p := place(spec, Facts{Nodes: cluster(2, 1, 2), StorageClasses: wffc("enc")})
		if !p.OK() {
			t.Fatalf("refused: %+v", p.Problems)
		}
		if len(p.Groups) != 2 || p.Groups[1].Suffix != "zone-1" || p.Groups[1].FirstServer != 2 || p.Groups[1].Replicas != 2 {
			t.Fatalf("groups = %+v", p.Groups)
		}
		term := p.Groups[1].Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
		if term.Key != zoneKey || term.Operator != corev1.NodeSelectorOpIn || !slices.Equal(term.Values, []string{"z1"}) {
			t.Fatalf("node affinity = %+v", term)
		}
		if got := p.LayoutStatus().DrivesPerDomain; len(got) != 2 || got[0].Drives != 4 {
			t.Fatalf("drivesPerDomain = %+v", got)
		}
	})
	t.Run("spread over zones with DoNotSchedule", func(t *testing.T) {
		p := place(pool(v1.MediaArrayLUN, 4, 2, []string{"a"}, domainKey(zoneKey), tolerate(0, 1, 0)),
			Facts{Nodes: cluster(2, 1, 2), StorageClasses: wffc("a")})
		if !p.OK() {
			t.Fatalf("refused: %+v", p.Problems)
		}
		tsc := p.Groups[0].TopologySpreadConstraints
		if len(tsc) != 1 || tsc[0].TopologyKey != zoneKey || tsc[0].WhenUnsatisfiable != corev1.DoNotSchedule || tsc[0].MaxSkew != 1 {
			t.Fatalf("spread = %+v", tsc)
		}
	})
}

func TestMediaDefaultParity(t *testing.T) {
	for _, tc := range []struct {
		media   v1.Media
		setSize int
		want    int
	}{
		{v1.MediaLocalNVMe, 2, 1}, {v1.MediaLocalNVMe, 4, 2}, {v1.MediaLocalNVMe, 6, 2},
		{v1.MediaLocalNVMe, 8, 2}, {v1.MediaNVMeoF, 10, 3}, {v1.MediaNVMeoF, 12, 3},
		{v1.MediaNVMeoF, 16, 4}, {v1.MediaArrayLUN, 16, 1}, {v1.MediaArrayLUN, 2, 1},
	} {
		if got := MediaDefaultParity(tc.media, tc.setSize); got != tc.want {
			t.Errorf("MediaDefaultParity(%s, %d) = %d, want %d", tc.media, tc.setSize, got, tc.want)
		}
	}
}

func TestToStatus(t *testing.T) {
	ft := Tolerance{Drives: 2, Servers: 1, Domains: 1, Backends: 0, HasBackends: true}.ToStatus()
	if ft.Backends == nil || *ft.Backends != 0 || ft.Drives != 2 {
		t.Fatalf("status = %+v", ft)
	}
	if (Tolerance{Drives: 1}).ToStatus().Backends != nil {
		t.Fatal("backends reported for LocalNVMe")
	}
}

func TestAllowedTopologiesLimitEligibleNodes(t *testing.T) {
	// An array reachable only from zone z0's nodes: 4 servers over 2 zones
	// x 2 nodes can only use the 2 nodes of z0.
	sc := class("array", storagev1.VolumeBindingWaitForFirstConsumer)
	sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
		{Key: zoneKey, Values: []string{"z0"}},
	}}}
	facts := Facts{Nodes: cluster(2, 1, 2), StorageClasses: []storagev1.StorageClass{sc}}
	p := place(pool(v1.MediaLocalNVMe, 4, 1, []string{"array"}, tolerate(0, 0, 0)), facts)
	if p.OK() || p.Problems[0].Reason != v1.ReasonNoMatchingNodes || !strings.Contains(p.Problems[0].Message, "only 2") {
		t.Fatalf("problems = %+v", p.Problems)
	}
	p = place(pool(v1.MediaNVMeoF, 4, 2, []string{"array"}, tolerate(0, 1, 0)), facts)
	if !p.OK() || p.Domains != 2 {
		t.Fatalf("NVMeoF over the 2 reachable nodes: %+v, domains %d", p.Problems, p.Domains)
	}
}
