package controllers

import (
	"fmt"
	"sort"

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
	st := &t.Status
	st.ObservedGeneration = t.Generation
	computeImages(t, s, image)

	servers := builders.TopologyPools(s.servers)
	// Pools not yet in the topology file follow, by name.
	inFile := map[string]bool{}
	for _, p := range servers {
		inFile[p.Name] = true
	}
	for _, p := range s.servers {
		if !inFile[p.Name] {
			servers = append(servers, p)
		}
	}
	gateways := append([]v1.GatewayPool(nil), s.gateways...)
	sort.Slice(gateways, func(i, j int) bool { return gateways[i].Name < gateways[j].Name })

	st.Pools = nil
	st.FaultTolerance = nil
	st.Endpoints = v1.TenantEndpoints{}
	var notReady, degraded []string
	var degradedReason string
	for _, p := range servers {
		ready := meta.IsStatusConditionTrue(p.Status.Conditions, v1.ConditionReady)
		st.Pools = append(st.Pools, v1.TenantPoolStatus{Name: p.Name, Kind: "ServerPool", Ready: ready, Tolerates: p.Status.Tolerates.DeepCopy()})
		if !ready {
			notReady = append(notReady, "ServerPool "+p.Name)
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
			degraded = append(degraded, fmt.Sprintf("ServerPool %s: %s", p.Name, c.Message))
			degradedReason = c.Reason
		}
		st.FaultTolerance = weakest(st.FaultTolerance, p.Status.Tolerates)
	}
	for _, g := range gateways {
		ready := meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionReady)
		st.Pools = append(st.Pools, v1.TenantPoolStatus{Name: g.Name, Kind: "GatewayPool", Ready: ready})
		if !ready {
			notReady = append(notReady, "GatewayPool "+g.Name)
		}
		if c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
			degraded = append(degraded, fmt.Sprintf("GatewayPool %s: %s", g.Name, c.Message))
			degradedReason = c.Reason
		}
		if g.Status.Endpoint != "" {
			st.Endpoints.Gateways = append(st.Endpoints.Gateways, g.Status.Endpoint)
		}
	}
	if len(s.servers) > 0 {
		st.Endpoints.S3 = builders.ServiceURL(t, builders.S3ServiceName(t.Name), clusterDomain)
	}
	if s.capacity != nil {
		st.Capacity = &v1.TenantCapacity{
			Raw:    resource.NewQuantity(s.capacity.TotalBytes, resource.BinarySI),
			Usable: resource.NewQuantity(s.capacity.UsableBytes, resource.BinarySI),
			Used:   resource.NewQuantity(s.capacity.UsedBytes, resource.BinarySI),
		}
	}

	gen := t.Generation
	creds := meta.FindStatusCondition(st.Conditions, v1.ConditionCredentialsReady)
	certs := meta.FindStatusCondition(st.Conditions, v1.ConditionCertificatesReady)
	pools := len(s.servers) + len(s.gateways)
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
	case pools == 0:
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, v1.ReasonCreating,
			"no ServerPool or GatewayPool names this tenant in spec.tenantRef yet")
		st.Phase = v1.TenantPending
	case len(notReady) > 0:
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, v1.ReasonWaitingForPods,
			fmt.Sprintf("%d of %d pool(s) not ready: %v", len(notReady), pools, notReady))
		st.Phase = v1.TenantProvisioning
	default:
		setCondition(&st.Conditions, gen, v1.ConditionReady, true, v1.ReasonReconciled, fmt.Sprintf("%d pool(s) ready", pools))
		st.Phase = v1.TenantReady
	}
	if len(degraded) > 0 {
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, true, degradedReason, fmt.Sprint(degraded))
		if st.Phase != v1.TenantPending {
			st.Phase = v1.TenantDegraded
		}
	} else {
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, false, v1.ReasonReconciled, "every pool has its full redundancy")
	}
	progressing := st.Phase == v1.TenantProvisioning
	if progressing {
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, v1.ReasonWaitingForPods, "pools are being created or started")
	} else {
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, false, v1.ReasonReconciled, "nothing to converge")
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
