package controllers

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
)

// computeTenantStatus derives the tenant's status from what the steps found
// and its pools' status. Pure: it only reads the scope.
func computeTenantStatus(t *v1.Tenant, s *tenantScope, clusterDomain, image string) {
	t.Status.ObservedGeneration = t.Generation
	computeImages(t, s, image)
	pools := observeTenantPools(s)
	setTenantPools(&t.Status, pools)
	setTenantEndpoints(t, s, pools, clusterDomain)
	setTenantCapacity(&t.Status, s)
	setTenantReady(t, s, pools)
	setTenantDegraded(t, pools, s.certificateExpiring)
	setTenantUpgradingPhase(&t.Status)
	setTenantProgressing(t)
}

// setTenantUpgradingPhase: a roll-out under way is the phase, over the
// degradation it causes (one server restarting at a time); a paused one
// (Upgrading=False, HealthGateFailed) leaves the phase to the rest.
func setTenantUpgradingPhase(st *v1.TenantStatus) {
	if st.Phase != v1.TenantPending && meta.IsStatusConditionTrue(st.Conditions, v1.ConditionUpgrading) {
		st.Phase = v1.TenantUpgrading
	}
}

// tenantPools is what a tenant's pools report, in status order: server
// pools as the topology file lists them (pools not yet in it follow, by
// name), then gateway pools by name.
type tenantPools struct {
	servers  []v1.ServerPool
	gateways []v1.GatewayPool
	notReady []string // "<Kind> <name>" of each pool not Ready
	// stuck are "<Kind> <name>: <message>" of each pool whose pods the
	// kubelet cannot start, and stuckReason the reason of the first.
	stuck       []string
	stuckReason string
	degraded    []string // "<Kind> <name>: <message>" of each Degraded pool
	// degradedReason is the reason of the last Degraded pool.
	degradedReason string
}

func observeTenantPools(s *tenantScope) tenantPools {
	var out tenantPools
	out.servers = builders.TopologyPools(s.servers)
	inFile := map[string]bool{}
	for _, p := range out.servers {
		inFile[p.Name] = true
	}
	for _, p := range s.servers {
		if !inFile[p.Name] {
			out.servers = append(out.servers, p)
		}
	}
	out.gateways = append([]v1.GatewayPool(nil), s.gateways...)
	sort.Slice(out.gateways, func(i, j int) bool { return out.gateways[i].Name < out.gateways[j].Name })
	for _, p := range out.servers {
		out.observe("ServerPool "+p.Name, p.Status.Conditions)
	}
	for _, g := range out.gateways {
		out.observe("GatewayPool "+g.Name, g.Status.Conditions)
	}
	return out
}

func (o *tenantPools) observe(pool string, conditions []metav1.Condition) {
	if !meta.IsStatusConditionTrue(conditions, v1.ConditionReady) {
		o.notReady = append(o.notReady, pool)
	}
	if c := meta.FindStatusCondition(conditions, v1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse &&
		(c.Reason == v1.ReasonImagePullFailed || c.Reason == v1.ReasonContainerStartFailed) {
		o.stuck = append(o.stuck, fmt.Sprintf("%s: %s", pool, c.Message))
		if o.stuckReason == "" || c.Reason == v1.ReasonImagePullFailed {
			o.stuckReason = c.Reason
		}
	}
	if c := meta.FindStatusCondition(conditions, v1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		o.degraded = append(o.degraded, fmt.Sprintf("%s: %s", pool, c.Message))
		o.degradedReason = c.Reason
	}
}

// setTenantPools lists the pools with their readiness, and what the
// weakest server pool survives.
func setTenantPools(st *v1.TenantStatus, pools tenantPools) {
	st.Pools = nil
	st.FaultTolerance = nil
	for _, p := range pools.servers {
		st.Pools = append(st.Pools, v1.TenantPoolStatus{Name: p.Name, Kind: "ServerPool",
			Ready: meta.IsStatusConditionTrue(p.Status.Conditions, v1.ConditionReady), Tolerates: p.Status.Tolerates.DeepCopy()})
		st.FaultTolerance = weakest(st.FaultTolerance, p.Status.Tolerates)
	}
	for _, g := range pools.gateways {
		st.Pools = append(st.Pools, v1.TenantPoolStatus{Name: g.Name, Kind: "GatewayPool",
			Ready: meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionReady)})
	}
}

// setTenantEndpoints: the S3 Service once a server pool exists, and each
// gateway pool's endpoint.
func setTenantEndpoints(t *v1.Tenant, s *tenantScope, pools tenantPools, clusterDomain string) {
	st := &t.Status
	st.Endpoints = v1.TenantEndpoints{}
	for _, g := range pools.gateways {
		if g.Status.Endpoint != "" {
			st.Endpoints.Gateways = append(st.Endpoints.Gateways, g.Status.Endpoint)
		}
	}
	if len(s.servers) > 0 {
		st.Endpoints.S3 = builders.ServiceURL(t, builders.S3ServiceName(t.Name), clusterDomain)
	}
}

// setTenantCapacity copies the engine's figures; the last ones stay when
// the engine was not asked.
func setTenantCapacity(st *v1.TenantStatus, s *tenantScope) {
	if s.capacity == nil {
		return
	}
	st.Capacity = &v1.TenantCapacity{
		Raw:    resource.NewQuantity(s.capacity.TotalBytes, resource.BinarySI),
		Usable: resource.NewQuantity(roundUsed(s.capacity.UsableBytes, s.capacity.TotalBytes), resource.BinarySI),
		Used:   resource.NewQuantity(roundUsed(s.capacity.UsedBytes, s.capacity.TotalBytes), resource.BinarySI),
	}
}

// roundUsed rounds used (or usable) bytes to the nearest multiple of a
// power of two near raw/4096 (1 MiB at least): exact figures would
// rewrite the status at every reconcile of a tenant being written to
// (usable follows the drives' free space), and a power of two keeps the
// quantities readable (2Gi, not 2147483500).
func roundUsed(used, raw int64) int64 {
	q := int64(1 << 20)
	for q*2 <= raw/4096 {
		q *= 2
	}
	return (used + q/2) / q * q
}

// setTenantReady sets Ready and the phase: credentials first, then
// certificates, then at least one pool, then every pool Ready.
func setTenantReady(t *v1.Tenant, s *tenantScope, pools tenantPools) {
	st := &t.Status
	gen := t.Generation
	creds := meta.FindStatusCondition(st.Conditions, v1.ConditionCredentialsReady)
	certs := meta.FindStatusCondition(st.Conditions, v1.ConditionCertificatesReady)
	n := len(s.servers) + len(s.gateways)
	switch {
	case creds == nil || creds.Status != metav1.ConditionTrue:
		msg := "waiting for credentials"
		if creds != nil {
			msg = creds.Message
		}
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, v1.ReasonSecretMissing, msg)
		st.Phase = v1.TenantPending
	case certs == nil || certs.Status != metav1.ConditionTrue:
		reason, msg := v1.ReasonCreating, "waiting for certificates"
		if certs != nil {
			reason, msg = certs.Reason, certs.Message
		}
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, reason, msg)
		st.Phase = v1.TenantPending
	case n == 0:
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, v1.ReasonCreating,
			"no ServerPool or GatewayPool names this tenant in spec.tenantRef yet")
		st.Phase = v1.TenantPending
	case len(pools.stuck) > 0:
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, pools.stuckReason, strings.Join(pools.stuck, "; "))
		st.Phase = v1.TenantProvisioning
	case len(pools.notReady) > 0:
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, v1.ReasonWaitingForPods,
			fmt.Sprintf("%d of %d pool(s) not ready: %v", len(pools.notReady), n, pools.notReady))
		st.Phase = v1.TenantProvisioning
	default:
		setCondition(&st.Conditions, gen, v1.ConditionReady, true, v1.ReasonReconciled, fmt.Sprintf("%d pool(s) ready", n))
		st.Phase = v1.TenantReady
	}
}

// setTenantDegraded sets Degraded from the pools' own and from a served
// certificate close to expiry; a degraded tenant that is not Pending is in
// phase Degraded. Runs after setTenantReady.
func setTenantDegraded(t *v1.Tenant, pools tenantPools, certificateExpiring string) {
	st := &t.Status
	switch {
	case len(pools.degraded) > 0:
		setCondition(&st.Conditions, t.Generation, v1.ConditionDegraded, true, pools.degradedReason, fmt.Sprint(pools.degraded))
	case certificateExpiring != "":
		setCondition(&st.Conditions, t.Generation, v1.ConditionDegraded, true, v1.ReasonCertificateExpiring, certificateExpiring)
	default:
		setCondition(&st.Conditions, t.Generation, v1.ConditionDegraded, false, v1.ReasonReconciled, "every pool has its full redundancy")
		return
	}
	if st.Phase != v1.TenantPending {
		st.Phase = v1.TenantDegraded
	}
}

// setTenantProgressing: the tenant progresses while it provisions its
// pools. Runs last: it reads the phase.
func setTenantProgressing(t *v1.Tenant) {
	st := &t.Status
	if st.Phase == v1.TenantProvisioning {
		setCondition(&st.Conditions, t.Generation, v1.ConditionProgressing, true, v1.ReasonWaitingForPods, "pools are being created or started")
	} else {
		setCondition(&st.Conditions, t.Generation, v1.ConditionProgressing, false, v1.ReasonReconciled, "nothing to converge")
	}
}

// tenantPoolsReady: every server pool of the tenant is Ready (at least one).
func tenantPoolsReady(s *tenantScope) bool {
	if len(s.servers) == 0 {
		return false
	}
	for _, p := range s.servers {
		if !meta.IsStatusConditionTrue(p.Status.Conditions, v1.ConditionReady) {
			return false
		}
	}
	return true
}

// weakest combines two tolerances into what both pools survive.
func weakest(a, b *v1.FaultTolerance) *v1.FaultTolerance {
	if b == nil {
		return a
	}
	if a == nil {
		return b.DeepCopy()
	}
	out := &v1.FaultTolerance{Drives: min(a.Drives, b.Drives), Servers: min(a.Servers, b.Servers), Domains: min(a.Domains, b.Domains)}
	switch {
	case a.Backends == nil:
		out.Backends = b.Backends
	case b.Backends == nil:
		out.Backends = a.Backends
	default:
		m := min(*a.Backends, *b.Backends)
		out.Backends = &m
	}
	return out
}

// computeImages: the target image is current once every strata pod of the
// tenant runs it: each StatefulSet and Deployment has the image in its
// template, has been observed by its controller since (observedGeneration)
// and counts all its pods as updated. Until then the tenant is Upgrading,
// with its progress.
func computeImages(t *v1.Tenant, s *tenantScope, image string) {
	st := &t.Status
	var updated, total int32
	for _, sts := range s.statefulSets {
		n := ptrValue(sts.Spec.Replicas)
		total += n
		if templateImage(sts.Spec.Template.Spec) == image && sts.Status.ObservedGeneration >= sts.Generation {
			updated += min(sts.Status.UpdatedReplicas, n)
		}
	}
	for _, d := range s.deployments {
		n := ptrValue(d.Spec.Replicas)
		total += n
		if templateImage(d.Spec.Template.Spec) == image && d.Status.ObservedGeneration >= d.Generation {
			updated += min(d.Status.UpdatedReplicas, n)
		}
	}
	switch {
	case updated == total || st.CurrentImage == "":
		// Done, or the first roll-out: nothing runs another image.
		st.CurrentImage = image
		if updated == total {
			st.TargetImage, st.Upgrade = "", nil
		} else {
			st.TargetImage, st.Upgrade = image, &v1.UpgradeProgress{Updated: updated, Total: total}
		}
	case st.CurrentImage == image && st.TargetImage == "":
		// A pod restarting is not a roll-out.
	default:
		st.TargetImage = image
		st.Upgrade = &v1.UpgradeProgress{Updated: updated, Total: total}
	}
	for _, p := range s.servers {
		if c := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionUpgrading); c != nil && c.Reason == v1.ReasonHealthGateFailed {
			setCondition(&st.Conditions, t.Generation, v1.ConditionUpgrading, false, v1.ReasonHealthGateFailed,
				fmt.Sprintf("ServerPool %s: %s", p.Name, c.Message))
			return
		}
	}
	if st.TargetImage != "" && st.TargetImage != st.CurrentImage {
		setCondition(&st.Conditions, t.Generation, v1.ConditionUpgrading, true, v1.ReasonRollingUpdate,
			fmt.Sprintf("rolling %s -> %s: %d of %d pods updated", st.CurrentImage, st.TargetImage, updated, total))
	} else {
		setCondition(&st.Conditions, t.Generation, v1.ConditionUpgrading, false, v1.ReasonReconciled, "every pod runs "+st.CurrentImage)
	}
}

func templateImage(spec corev1.PodSpec) string {
	if len(spec.Containers) == 0 {
		return ""
	}
	return spec.Containers[0].Image
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
