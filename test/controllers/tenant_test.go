package controllers_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/engine"
)

var _ = Describe("a Tenant with a ServerPool and a GatewayPool", func() {
	var ns string
	var t *v1.Tenant
	var sp *v1.ServerPool
	var gp *v1.GatewayPool

	BeforeEach(func() {
		ns = newNamespace()
		t, sp, gp = tenant(ns), nvmePool(ns), gatewayPool(ns)
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		Expect(k8s.Create(ctx, gp)).To(Succeed())
	})

	It("creates credentials, certificates, Services, the topology file and the workloads", func() {
		By("generating root keys once, never logged, in a Secret without owner")
		root := &corev1.Secret{}
		Eventually(get(root, ns, "media-root-credentials")).Should(Not(BeNil()))
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-root-credentials"), root) }).Should(Succeed())
		Expect(root.Data[builders.AccessKeyKey]).To(HaveLen(20))
		Expect(root.Data[builders.SecretKeyKey]).To(HaveLen(40))
		Expect(root.OwnerReferences).To(BeEmpty())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		Expect(t.Status.CredentialsSecret).To(Equal("media-root-credentials"))

		By("rendering the IAM file and the operator CA's serving certificate")
		iam := &corev1.Secret{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-iam"), iam) }).Should(Succeed())
		Expect(string(iam.Data["iam.json"])).To(Equal(`{"users":[]}`))
		tls := &corev1.Secret{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-tls"), tls) }).Should(Succeed())
		Expect(tls.Type).To(Equal(corev1.SecretTypeTLS))
		Expect(tls.Data).To(HaveKey("ca.crt"))
		Eventually(tenantCondition(t, v1.ConditionCertificatesReady)).Should(Equal("True/Reconciled"))

		By("exposing S3 and giving server pods DNS names")
		svc := &corev1.Service{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media"), svc) }).Should(Succeed())
		Expect(svc.Spec.Ports[0].Port).To(Equal(int32(443)), "expose.port defaults to 443 with TLS")
		hl := &corev1.Service{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-hl"), hl) }).Should(Succeed())
		Expect(hl.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(hl.Spec.PublishNotReadyAddresses).To(BeTrue())

		By("letting only the tenant's servers reach the internode port")
		np := &networkingv1.NetworkPolicy{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-servers"), np) }).Should(Succeed())
		Expect(np.Spec.PodSelector.MatchLabels).To(Equal(builders.ServerSelector("media")))
		Expect(np.Spec.Ingress).To(HaveLen(2))
		Expect(np.Spec.Ingress[0].From).To(BeEmpty(), "S3 from anywhere by default")
		Expect(np.Spec.Ingress[1].Ports[0].Port.IntValue()).To(Equal(builders.InternodePort))
		Expect(np.Spec.Ingress[1].From[0].PodSelector.MatchLabels).To(Equal(builders.ServerSelector("media")))

		By("placing the pool and listing it in the topology file")
		Eventually(poolCondition(sp, v1.ConditionStorageReady)).Should(Equal("True/Reconciled"))
		Expect(sp.Status.Layout).To(Equal(&v1.ErasureLayout{Sets: 1, SetSize: 16, Parity: 4}))
		Expect(sp.Status.Tolerates).To(Equal(&v1.FaultTolerance{Drives: 4, Servers: 1, Domains: 1}))
		cm := &corev1.ConfigMap{}
		var topo builders.Topology
		Eventually(func() (int, error) {
			if err := k8s.Get(ctx, key(ns, "media-topology"), cm); err != nil {
				return 0, err
			}
			return len(topo.Pools), json.Unmarshal([]byte(cm.Data["topology.json"]), &topo)
		}).Should(Equal(1))
		Expect(k8s.Get(ctx, key(ns, "media"), t)).To(Succeed())
		Expect(topo.DeploymentID).To(Equal(string(t.UID)))
		Expect(topo.Pools[0]).To(Equal(builders.TopologyPool{
			Name:       "nvme",
			Endpoints:  []string{"https://media-nvme-{0...3}.media-hl." + ns + ".svc.cluster.local:9000/data{0...3}"},
			SetSize:    16,
			Parity:     4,
			DriveOrder: []int{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15},
			State:      "Active",
		}))

		By("running the servers as a StatefulSet with a claim per drive")
		sts := &appsv1.StatefulSet{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), sts) }).Should(Succeed())
		Expect(*sts.Spec.Replicas).To(Equal(int32(4)))
		Expect(sts.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
		Expect(sts.Spec.ServiceName).To(Equal("media-hl"))
		Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(4))
		for i, vct := range sts.Spec.VolumeClaimTemplates {
			Expect(vct.Name).To(Equal("data" + string(rune('0'+i))))
			Expect(*vct.Spec.StorageClassName).To(Equal("nvme-local"))
			Expect(vct.Spec.Resources.Requests[corev1.ResourceStorage]).To(Equal(resource.MustParse("100Gi")))
		}
		Expect(metav1.IsControlledBy(sts, sp)).To(BeTrue())
		pod := sts.Spec.Template.Spec
		c := container(pod)
		Expect(c.Image).To(Equal(image))
		Expect(c.Args).To(Equal([]string{"server", "--address", ":9000", "--topology", "/etc/strata/topology/topology.json",
			"--metrics-token-file", "/etc/strata/metrics/token", "--certs-dir", "/etc/strata/certs"}))
		Expect(pod.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", "media-metrics-token")))
		Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "metrics-token", MountPath: "/etc/strata/metrics", ReadOnly: true}))
		Expect(c.Env).To(ContainElements(
			corev1.EnvVar{Name: "STRATA_ROOT_USER_FILE", Value: "/etc/strata/root/accessKey"},
			corev1.EnvVar{Name: "STRATA_ROOT_PASSWORD_FILE", Value: "/etc/strata/root/secretKey"},
			corev1.EnvVar{Name: "STRATA_IAM_FILE", Value: "/etc/strata/iam/iam.json"},
		))
		for _, e := range c.Env {
			if e.Name == "STRATA_MEMORY_LIMIT" {
				// The engine sizes itself from its memory limit.
				Expect(e.ValueFrom.ResourceFieldRef).To(Equal(&corev1.ResourceFieldSelector{ContainerName: "strata", Resource: "limits.memory", Divisor: resource.MustParse("1")}))
				continue
			}
			Expect(e.ValueFrom).To(BeNil(), "credentials reach the engine as files only")
		}
		Expect(c.Resources.Limits[corev1.ResourceMemory]).To(Equal(resource.MustParse("4Gi")), "the default memory limit")
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/strata/health/live"))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/strata/health/ready"))
		Expect(c.ReadinessProbe.HTTPGet.Scheme).To(Equal(corev1.URISchemeHTTPS))
		Expect(c.Resources.Requests[corev1.ResourceCPU]).To(Equal(resource.MustParse("1")))
		Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
		Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
		Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
		Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
		Expect(*pod.TerminationGracePeriodSeconds).To(BeNumerically(">=", 60))
		// The engine's --shutdown-delay is the one drain window.
		Expect(c.Lifecycle).To(BeNil())
		Expect(c.StartupProbe.HTTPGet.Path).To(Equal("/strata/health/live"))
		Expect(c.StartupProbe.PeriodSeconds).To(BeEquivalentTo(1))
		Expect(c.StartupProbe.PeriodSeconds * c.StartupProbe.FailureThreshold).To(BeNumerically(">=", 60))
		Expect(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey).To(Equal(corev1.LabelHostname))
		Expect(pod.NodeSelector).To(Equal(map[string]string{"node-role.strata.dev/storage": "true"}))
		Expect(sts.Spec.Template.Annotations).To(HaveKey(builders.AnnotationCredentialsHash))

		By("allowing as many servers down as the layout survives")
		pdb := &policyv1.PodDisruptionBudget{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), pdb) }).Should(Succeed())
		Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))

		By("running the gateways on a claim the operator created, with an HPA, a Service and a PDB")
		pvc := &corev1.PersistentVolumeClaim{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nas-data"), pvc) }).Should(Succeed())
		Expect(pvc.Spec.AccessModes).To(ConsistOf(corev1.ReadWriteMany))
		Expect(pvc.OwnerReferences).To(BeEmpty())
		d := &appsv1.Deployment{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nas"), d) }).Should(Succeed())
		Expect(*d.Spec.Replicas).To(Equal(int32(2)))
		Expect(d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(Equal(0))
		gc := container(d.Spec.Template.Spec)
		Expect(gc.Args).To(Equal([]string{"gateway", "--address", ":9000", "--root", "/data", "--metrics-token-file", "/etc/strata/metrics/token", "--certs-dir", "/etc/strata/certs"}))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "media-nas-data")))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", "media-metrics-token")))
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nas"), hpa) }).Should(Succeed())
		Expect(*hpa.Spec.MinReplicas).To(Equal(int32(2)))
		Expect(hpa.Spec.MaxReplicas).To(Equal(int32(8)))
		Expect(k8s.Get(ctx, key(ns, "media-nas"), &corev1.Service{})).To(Succeed())
		Expect(k8s.Get(ctx, key(ns, "media-nas"), &policyv1.PodDisruptionBudget{})).To(Succeed())

		By("recording Events for what it did")
		Eventually(eventsFor(ns, "media")).Should(ContainElements("CredentialsGenerated", "CertificateIssued"))
		Eventually(eventsFor(ns, "nvme")).Should(ContainElement("createdStatefulSet"))
	})

	It("aggregates status from the workloads and creates the buckets once ready", func() {
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{}) }).Should(Succeed())
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nas"), &appsv1.Deployment{}) }).Should(Succeed())
		Eventually(tenantCondition(t, v1.ConditionReady)).Should(Equal("False/WaitingForPods"))
		Expect(t.Status.Phase).To(Equal(v1.TenantProvisioning))

		fakeEn.setInfo(engine.Info{Pools: []engine.Pool{{Name: "nvme", Drives: []engine.Drive{
			{State: "online"}, {State: "online"}, {State: "offline"},
		}}}, Capacity: engine.Capacity{TotalBytes: 1 << 40, UsableBytes: 3 << 38, UsedBytes: 1 << 30}})
		DeferCleanup(func() { fakeEn.setInfo(engine.Info{}) })
		markStatefulSetReady(ns, "media-nvme")
		markDeploymentReady(ns, "media-nas")

		Eventually(poolCondition(sp, v1.ConditionReady)).Should(Equal("True/Reconciled"))
		Expect(sp.Status.ReadyServers).To(Equal(int32(4)))
		Expect(sp.Status.Drives).To(Equal(v1.DriveCounts{Online: 2, Offline: 1}))
		Eventually(poolCondition(sp, v1.ConditionDegraded)).Should(Equal("True/DrivesOffline"))
		Eventually(gatewayCondition(gp, v1.ConditionReady)).Should(Equal("True/Reconciled"))
		Expect(gp.Status.ReadyReplicas).To(Equal(int32(2)))
		Expect(gp.Status.Selector).To(ContainSubstring("storage.strata.dev/pool=nas"))

		Eventually(func() (v1.TenantPhase, error) {
			err := k8s.Get(ctx, key(ns, "media"), t)
			return t.Status.Phase, err
		}).Should(Equal(v1.TenantDegraded))
		Expect(t.Status.Endpoints.S3).To(Equal("https://media." + ns + ".svc.cluster.local:443"))
		Expect(t.Status.Endpoints.Gateways).To(ConsistOf("https://media-nas." + ns + ".svc.cluster.local:443"))
		Expect(t.Status.FaultTolerance).To(Equal(&v1.FaultTolerance{Drives: 4, Servers: 1, Domains: 1}))
		Expect(t.Status.Pools).To(HaveLen(2))
		Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
		Eventually(tenantCondition(t, v1.ConditionReady)).Should(Equal("True/Reconciled"))
		Expect(t.Status.Capacity.Raw.Value()).To(Equal(int64(1 << 40)))

		By("creating the declared buckets through S3")
		Eventually(tenantCondition(t, v1.ConditionBucketsReady)).Should(Equal("True/Reconciled"))
		Expect(fakeEn.bucketsAt(t.Status.Endpoints.S3)).To(ConsistOf(engine.Bucket{Name: "photos", Versioning: "Enabled"}))
	})

	It("removes the NetworkPolicy when the tenant turns it off, and restricts S3 to s3From", func() {
		np := &networkingv1.NetworkPolicy{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-servers"), np) }).Should(Succeed())
		peers := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}}}}
		update(t, func(t *v1.Tenant) { t.Spec.NetworkPolicy.S3From = peers })
		Eventually(func() ([]networkingv1.NetworkPolicyPeer, error) {
			err := k8s.Get(ctx, key(ns, "media-servers"), np)
			return np.Spec.Ingress[0].From, err
		}).Should(Equal(peers))
		update(t, func(t *v1.Tenant) { t.Spec.NetworkPolicy.Enabled = ptr.To(false) })
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, key(ns, "media-servers"), &networkingv1.NetworkPolicy{}))
		}).Should(BeTrue())
	})

	It("applies spec changes and reverts hand edits, without fighting the HPA", func() {
		sts := &appsv1.StatefulSet{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), sts) }).Should(Succeed())
		d := &appsv1.Deployment{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nas"), d) }).Should(Succeed())

		By("updating the StatefulSet when the pool's resources change")
		update(sp, func(p *v1.ServerPool) { p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3") })
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "media-nvme"), sts)
			q := sts.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
			return q.String(), err
		}).Should(Equal("3"))

		By("reverting an image edited by hand on the StatefulSet")
		update(sts, func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "someone/else:latest" })
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return sts.Spec.Template.Spec.Containers[0].Image, err
		}).Should(Equal(image))

		By("leaving the replica count to the HPA")
		update(d, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](6) }) // what the HPA would do
		update(gp, func(g *v1.GatewayPool) {
			g.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		})
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "media-nas"), d)
			q := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
			return q.String(), err
		}).Should(Equal("500m"))
		Expect(*d.Spec.Replicas).To(Equal(int32(6)))

		By("rolling the pods when the root keys change")
		before := sts.Spec.Template.Annotations[builders.AnnotationCredentialsHash]
		root := &corev1.Secret{}
		root.Namespace, root.Name = ns, "media-root-credentials"
		update(root, func(s *corev1.Secret) {
			s.Data[builders.SecretKeyKey] = []byte("rotated-secret-key-rotated-secret-key-00")
		})
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return sts.Spec.Template.Annotations[builders.AnnotationCredentialsHash], err
		}).ShouldNot(Equal(before))
	})

	It("writes nothing once converged", func() {
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{}) }).Should(Succeed())
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nas"), &policyv1.PodDisruptionBudget{}) }).Should(Succeed())
		versions := func() map[string]string {
			out := map[string]string{}
			for name, obj := range map[string]client.Object{
				"tenant": &v1.Tenant{}, "spool": &v1.ServerPool{}, "gwpool": &v1.GatewayPool{},
				"sts": &appsv1.StatefulSet{}, "deploy": &appsv1.Deployment{}, "cm": &corev1.ConfigMap{},
				"svc": &corev1.Service{}, "iam": &corev1.Secret{}, "tls": &corev1.Secret{},
			} {
				n := map[string]string{"tenant": "media", "spool": "nvme", "gwpool": "nas", "sts": "media-nvme",
					"deploy": "media-nas", "cm": "media-topology", "svc": "media", "iam": "media-iam", "tls": "media-tls"}[name]
				if err := k8s.Get(ctx, key(ns, n), obj); err != nil {
					out[name] = err.Error()
					continue
				}
				out[name] = obj.GetResourceVersion()
			}
			return out
		}
		// Converged: first the end state this spec can reach without pods
		// (the operator shares its work queue with every earlier spec's
		// tenants, so a quiet moment alone says little under load), then
		// two samples three seconds apart agree; from then on nothing is
		// written.
		Eventually(tenantCondition(t, v1.ConditionCertificatesReady)).WithTimeout(30 * time.Second).Should(Equal("True/Reconciled"))
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		Eventually(tenantCondition(t, v1.ConditionReady)).Should(Equal("False/WaitingForPods"))
		Eventually(func() (int64, error) {
			err := k8s.Get(ctx, key(ns, "media"), t)
			if c := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionReady); c != nil {
				return c.ObservedGeneration, err
			}
			return -1, err
		}).Should(Equal(t.Generation))
		last := versions()
		// Eventually's first sample comes at once: without this wait it
		// compared two reads a few milliseconds apart.
		time.Sleep(3 * time.Second)
		Eventually(func() bool {
			cur := versions()
			same := fmt.Sprint(cur) == fmt.Sprint(last)
			last = cur
			return same
		}).WithTimeout(30 * time.Second).WithPolling(3 * time.Second).Should(BeTrue())
		Consistently(versions).WithTimeout(5*time.Second).WithPolling(time.Second).Should(Equal(last),
			"an object was written after the tenant converged; its resourceVersion moved")
	})
})

var _ = Describe("deletion", func() {
	for _, policy := range []v1.DeletionPolicy{v1.DeletionPolicyRetain, v1.DeletionPolicyDelete} {
		It("with deletionPolicy "+string(policy)+" handles claims and keys accordingly", func() {
			ns := newNamespace()
			t := tenant(ns)
			t.Spec.DeletionPolicy = policy
			sp, gp := nvmePool(ns), gatewayPool(ns)
			Expect(k8s.Create(ctx, t)).To(Succeed())
			Expect(k8s.Create(ctx, sp)).To(Succeed())
			Expect(k8s.Create(ctx, gp)).To(Succeed())
			Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{}) }).Should(Succeed())
			Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nas-data"), &corev1.PersistentVolumeClaim{}) }).Should(Succeed())
			// The claims the StatefulSet controller would create.
			for i := range 4 {
				pvc := &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data0-media-nvme-" + string(rune('0'+i)),
						Labels: builders.PoolSelector("media", "nvme", builders.ComponentServer)},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}},
					},
				}
				Expect(k8s.Create(ctx, pvc)).To(Succeed())
			}

			Expect(k8s.Delete(ctx, t)).To(Succeed())
			Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(ns, "media"), &v1.Tenant{})) }).Should(BeTrue())
			Expect(apierrors.IsNotFound(k8s.Get(ctx, key(ns, "nvme"), &v1.ServerPool{}))).To(BeTrue())
			Expect(apierrors.IsNotFound(k8s.Get(ctx, key(ns, "nas"), &v1.GatewayPool{}))).To(BeTrue())
			Expect(apierrors.IsNotFound(k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{}))).To(BeTrue())

			claims := &corev1.PersistentVolumeClaimList{}
			Expect(k8s.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
			live := 0
			for _, c := range claims.Items {
				if c.DeletionTimestamp.IsZero() {
					live++
				}
			}
			rootErr := k8s.Get(ctx, key(ns, "media-root-credentials"), &corev1.Secret{})
			if policy == v1.DeletionPolicyRetain {
				Expect(live).To(Equal(5), "4 drives and the gateway claim are kept")
				Expect(rootErr).NotTo(HaveOccurred())
			} else {
				Expect(live).To(Equal(0))
				Expect(apierrors.IsNotFound(rootErr)).To(BeTrue())
			}
		})
	}
})

var _ = Describe("missing and invalid references", func() {
	It("a pool waits for its Tenant without a hot loop and starts when it appears", func() {
		ns := newNamespace()
		sp := nvmePool(ns)
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		Eventually(poolCondition(sp, v1.ConditionTenantFound)).Should(Equal("False/WaitingForTenant"))
		Expect(poolCondition(sp, v1.ConditionReady)()).To(Equal("False/WaitingForTenant"))
		rv := sp.ResourceVersion
		Consistently(func() string {
			_ = k8s.Get(ctx, key(ns, "nvme"), sp)
			return sp.ResourceVersion
		}).WithTimeout(3 * time.Second).Should(Equal(rv))
		Eventually(eventsFor(ns, "nvme")).Should(ContainElement("WaitingForTenant"))

		Expect(k8s.Create(ctx, tenant(ns))).To(Succeed())
		Eventually(poolCondition(sp, v1.ConditionTenantFound)).Should(Equal("True/Reconciled"))
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{}) }).Should(Succeed())
	})

	It("a user Secret that does not exist is reported, and picked up once created", func() {
		ns := newNamespace()
		t := tenant(ns)
		t.Spec.Users = []v1.UserSpec{{Name: "app", SecretRef: v1.SecretReference{Name: "app-keys"}, Policy: "readonly", Buckets: []string{"photos"}}}
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("False/SecretMissing"))
		Expect(t.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring(`Secret "app-keys" does not exist`))))
		Eventually(eventsFor(ns, "media")).Should(ContainElement("SecretMissing"))
		Expect(apierrors.IsNotFound(k8s.Get(ctx, key(ns, "media-iam"), &corev1.Secret{}))).To(BeTrue())

		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-keys"},
			StringData: map[string]string{"accessKey": "APPACCESSKEY", "secretKey": "app-secret"}})).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		iam := &corev1.Secret{}
		Expect(k8s.Get(ctx, key(ns, "media-iam"), iam)).To(Succeed())
		Expect(string(iam.Data["iam.json"])).To(Equal(`{"users":[{"accessKey":"APPACCESSKEY","secretKey":"app-secret","policy":"readonly","buckets":["photos"],"displayName":"app"}]}`))
	})

	It("a referenced root Secret that does not exist is reported, not replaced", func() {
		ns := newNamespace()
		t := tenant(ns)
		t.Spec.Credentials.SecretRef = &v1.SecretReference{Name: "my-root"}
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("False/SecretMissing"))
		Expect(apierrors.IsNotFound(k8s.Get(ctx, key(ns, "media-root-credentials"), &corev1.Secret{}))).To(BeTrue())
		Expect(apierrors.IsNotFound(k8s.Get(ctx, key(ns, "my-root"), &corev1.Secret{}))).To(BeTrue())
	})

	It("generated root keys that disappear are reported, never re-minted", func() {
		ns := newNamespace()
		t := tenant(ns)
		Expect(k8s.Create(ctx, t)).To(Succeed())
		root := &corev1.Secret{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-root-credentials"), root) }).Should(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		Expect(k8s.Delete(ctx, root)).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("False/SecretMissing"))
		Expect(t.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("was deleted; restore it from a backup"))))
		Consistently(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, key(ns, "media-root-credentials"), &corev1.Secret{}))
		}).Should(BeTrue())
	})

	It("encryption master keys: generated once and mounted into servers, a referenced Secret checked, a deleted one never re-minted", func() {
		ns := newNamespace()
		t := tenant(ns)
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Expect(k8s.Create(ctx, nvmePool(ns))).To(Succeed())
		keys := &corev1.Secret{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-encryption-keys"), keys) }).Should(Succeed())
		Expect(keys.OwnerReferences).To(BeEmpty(), "the keys outlive the Tenant with its data")
		Eventually(func() (*v1.EncryptionStatus, error) {
			err := k8s.Get(ctx, key(ns, "media"), t)
			return t.Status.Encryption, err
		}).Should(Equal(&v1.EncryptionStatus{KeysSecret: "media-encryption-keys", DefaultKey: "media-1", Keys: 1}))
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		Expect(t.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("encryption keys in Secret media-encryption-keys (default key media-1"))))
		Eventually(eventsFor(ns, "media")).Should(ContainElement("EncryptionKeysGenerated"))
		sts := &appsv1.StatefulSet{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), sts) }).Should(Succeed())
		Expect(sts.Spec.Template.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "STRATA_KMS_KEYS_FILE", Value: "/etc/strata/kms/keys.json"}))
		Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "media-encryption-keys")))

		By("a rotation (a second key made the default) is read, not reverted")
		rotated := `{"default": "media-2", "keys": {"media-1": "` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)) +
			`", "media-2": "` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32)) + `"}}`
		keys.Data["keys.json"] = []byte(rotated)
		Expect(k8s.Update(ctx, keys)).To(Succeed())
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "media"), t)
			return t.Status.Encryption.DefaultKey, err
		}).Should(Equal("media-2"))
		Expect(k8s.Get(ctx, key(ns, "media-encryption-keys"), keys)).To(Succeed())
		Expect(string(keys.Data["keys.json"])).To(Equal(rotated))

		By("a broken keys file is reported, naming no key")
		keys.Data["keys.json"] = []byte(`{"default": "nope", "keys": {"media-1": "c2hvcnQ="}}`)
		Expect(k8s.Update(ctx, keys)).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("False/SecretMissing"))
		Expect(t.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring(`key "media-1" is not 32 base64-encoded bytes`))))
		Expect(t.Status.Conditions).NotTo(ContainElement(HaveField("Message", ContainSubstring("c2hvcnQ"))))

		By("deleted, it is reported and not re-minted")
		Expect(k8s.Delete(ctx, keys)).To(Succeed())
		Eventually(func() []metav1.Condition {
			_ = k8s.Get(ctx, key(ns, "media"), t)
			return t.Status.Conditions
		}).Should(ContainElement(HaveField("Message", ContainSubstring("encrypted objects cannot be read without it"))))
		Consistently(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, key(ns, "media-encryption-keys"), &corev1.Secret{}))
		}).Should(BeTrue())

		By("a referenced Secret that does not exist is waited for")
		update(t, func(t *v1.Tenant) { t.Spec.Encryption.KeysSecretRef = &v1.SecretReference{Name: "vault-keys"} })
		Eventually(func() []metav1.Condition {
			_ = k8s.Get(ctx, key(ns, "media"), t)
			return t.Status.Conditions
		}).Should(ContainElement(HaveField("Message", ContainSubstring(`Secret "vault-keys" named by spec.encryption.keysSecretRef does not exist`))))
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault-keys"},
			StringData: map[string]string{"keys.json": rotated}})).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		Expect(t.Status.Encryption.KeysSecret).To(Equal("vault-keys"))
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), sts) }).Should(Succeed())
		Eventually(func() []corev1.Volume {
			_ = k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return sts.Spec.Template.Spec.Volumes
		}).Should(ContainElement(HaveField("Secret.SecretName", "vault-keys")))
	})

	It("notification targets: checked by the API server, rendered with their credentials for the pods, mounted before there are any, a change rolls nothing, none leaves an empty list", func() {
		ns := newNamespace()
		for want, tg := range map[string]v1.NotificationTargetSpec{
			"a nats, redis, amqp or kafka target needs subject": {Name: "jobs", Type: "nats", Endpoint: "nats://nats:4222"},
			"one or more kafka:// urls (kafkas:// for tls)":     {Name: "stream", Type: "kafka", Endpoint: "kafka://a:9092,kafkas://b:9093", Subject: "s3"},
			"an amqp:// (or amqps:// for tls) url":              {Name: "mq", Type: "amqp", Endpoint: "http://rabbit:5672", Subject: "q"},
			"exchange is for amqp targets only":                 {Name: "hook", Type: "webhook", Endpoint: "http://x", Exchange: "events"},
			"a redis:// (or rediss:// for tls) url":             {Name: "cache", Type: "redis", Endpoint: "http://redis:6379", Subject: "s3"},
			"endpoint is an http:// or https:// URL":            {Name: "hook", Type: "webhook", Endpoint: "ftp://x"},
			"one or more nats:// or tls:// URLs":                {Name: "jobs", Type: "nats", Endpoint: "nats://a:4222,http://b", Subject: "s3"},
			"supported values":                                  {Name: "q", Type: "mqtt", Endpoint: "mqtt://m:1883"},
			`should match '^[a-z0-9]([a-z0-9-]*[a-z0-9])?$'`:    {Name: "Bad_Name", Type: "webhook", Endpoint: "http://x"},
		} {
			t := tenant(ns)
			t.Spec.Notifications.Targets = []v1.NotificationTargetSpec{tg}
			err := k8s.Create(ctx, t)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%+v: %v", tg, err)
			Expect(strings.ToLower(err.Error())).To(ContainSubstring(strings.ToLower(want)))
		}
		t := tenant(ns)
		t.Spec.Notifications.Targets = []v1.NotificationTargetSpec{
			{Name: "hook", Type: "webhook", Endpoint: "https://events.example.com/s3", CredentialsSecretRef: &v1.SecretReference{Name: "hook-token"}},
			{Name: "jobs", Type: "nats", Endpoint: "nats://nats.messaging:4222", Subject: "s3.events"},
			{Name: "stream", Type: "kafka", Endpoint: "kafka://kafka-0.kafka:9092,kafka://kafka-1.kafka:9092", Subject: "s3-events"},
		}
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Expect(k8s.Create(ctx, nvmePool(ns))).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("False/SecretMissing"))
		Expect(t.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring(`notification target "hook": Secret "hook-token" does not exist`))))

		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook-token"},
			StringData: map[string]string{"token": "s3cr3t"}})).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		targets := &corev1.Secret{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-notify-targets"), targets) }).Should(Succeed())
		Expect(string(targets.Data["targets.json"])).To(Equal(`{"targets":[` +
			`{"id":"hook","type":"webhook","endpoint":"https://events.example.com/s3","authToken":"s3cr3t"},` +
			`{"id":"jobs","type":"nats","endpoint":"nats://nats.messaging:4222","subject":"s3.events"},` +
			`{"id":"stream","type":"kafka","endpoint":"kafka://kafka-0.kafka:9092,kafka://kafka-1.kafka:9092","subject":"s3-events"}]}`))
		sts := &appsv1.StatefulSet{}
		Eventually(func() []corev1.EnvVar {
			_ = k8s.Get(ctx, key(ns, "media-nvme"), sts)
			if len(sts.Spec.Template.Spec.Containers) == 0 {
				return nil
			}
			return sts.Spec.Template.Spec.Containers[0].Env
		}).Should(ContainElement(corev1.EnvVar{Name: "STRATA_NOTIFY_TARGETS_FILE", Value: "/etc/strata/notify/targets.json"}))
		Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "media-notify-targets")))
		template := sts.Spec.Template.DeepCopy()

		By("a new token reaches the targets file and rolls nothing (the servers read the file again)")
		token := &corev1.Secret{}
		Expect(k8s.Get(ctx, key(ns, "hook-token"), token)).To(Succeed())
		token.Data["token"] = []byte("rotated")
		Expect(k8s.Update(ctx, token)).To(Succeed())
		Eventually(func() string {
			_ = k8s.Get(ctx, key(ns, "media-notify-targets"), targets)
			return string(targets.Data["targets.json"])
		}).Should(ContainSubstring(`"authToken":"rotated"`))
		Consistently(func() *corev1.PodTemplateSpec {
			_ = k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return &sts.Spec.Template
		}).WithTimeout(3 * time.Second).Should(Equal(template))

		By("no targets: an empty list (a file gone is a fault to the engine, not a removal), nothing rolls")
		update(t, func(t *v1.Tenant) { t.Spec.Notifications.Targets = nil })
		Eventually(func() string {
			_ = k8s.Get(ctx, key(ns, "media-notify-targets"), targets)
			return string(targets.Data["targets.json"])
		}).Should(Equal(`{"targets":[]}`))
		Consistently(func() *corev1.PodTemplateSpec {
			_ = k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return &sts.Spec.Template
		}).WithTimeout(3 * time.Second).Should(Equal(template))
	})

	It("replication remotes: checked by the API server; a pair of Tenants naming each other gets each other's endpoint, CA bundle and root credentials, kept current", func() {
		ns, ns2 := newNamespace(), newNamespace()
		peer := &v1.ClaimTenantReference{Namespace: ns2, Name: "media"}
		keys := &v1.SecretReference{Name: "dr-keys"}
		for want, rm := range map[string]v1.ReplicationRemoteSpec{
			"either tenantRef":                   {Name: "dr"},
			"not both":                           {Name: "dr", TenantRef: peer, Endpoint: "https://s3.example.com"},
			"needs credentialsSecretRef":         {Name: "dr", Endpoint: "https://s3.example.com"},
			"is an http:// or https:// url":      {Name: "dr", Endpoint: "s3.example.com", CredentialsSecretRef: keys},
			"caconfigmapref is for a remote":     {Name: "dr", TenantRef: peer, CAConfigMapRef: &v1.SecretReference{Name: "ca"}},
			`should match '^[a-z0-9]([a-z0-9-]*`: {Name: "DR", TenantRef: peer},
		} {
			t := tenant(ns)
			t.Spec.Replication.Remotes = []v1.ReplicationRemoteSpec{rm}
			err := k8s.Create(ctx, t)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%+v: %v", rm, err)
			Expect(strings.ToLower(err.Error())).To(ContainSubstring(strings.ToLower(want)))
		}

		a := tenant(ns)
		a.Spec.Replication.Remotes = []v1.ReplicationRemoteSpec{{Name: "dr", TenantRef: peer}}
		Expect(k8s.Create(ctx, a)).To(Succeed())
		Expect(k8s.Create(ctx, nvmePool(ns))).To(Succeed())
		Eventually(tenantCondition(a, v1.ConditionCredentialsReady)).Should(Equal("False/SecretMissing"))
		Expect(a.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring(`replication remote "dr": Tenant `+ns2+`/media does not exist`))))

		By("the peer appears, naming the first in turn: a replication pair")
		b := tenant(ns2)
		b.Spec.Replication.Remotes = []v1.ReplicationRemoteSpec{{Name: "primary", TenantRef: &v1.ClaimTenantReference{Namespace: ns, Name: "media"}}}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		Eventually(tenantCondition(a, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		Eventually(tenantCondition(b, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		type target struct{ ID, Type, Endpoint, Username, Password, CAFile string }
		targetsOf := func(ns string) (target, map[string][]byte) {
			sec := &corev1.Secret{}
			if k8s.Get(ctx, key(ns, "media-notify-targets"), sec) != nil {
				return target{}, nil
			}
			var f struct{ Targets []target }
			Expect(json.Unmarshal(sec.Data["targets.json"], &f)).To(Succeed())
			Expect(f.Targets).To(HaveLen(1))
			return f.Targets[0], sec.Data
		}
		rootOf := func(ns string) (string, string) {
			sec := &corev1.Secret{}
			Expect(k8s.Get(ctx, key(ns, "media-root-credentials"), sec)).To(Succeed())
			return string(sec.Data["accessKey"]), string(sec.Data["secretKey"])
		}
		bundleOf := func(ns string) string {
			cm := &corev1.ConfigMap{}
			Expect(k8s.Get(ctx, key(ns, "media-ca-bundle"), cm)).To(Succeed())
			return cm.Data["ca.crt"]
		}
		for _, side := range []struct{ ns, peerNS, name string }{{ns, ns2, "dr"}, {ns2, ns, "primary"}} {
			Eventually(func() string { tg, _ := targetsOf(side.ns); return tg.ID }).Should(Equal(side.name))
			tg, data := targetsOf(side.ns)
			access, secret := rootOf(side.peerNS)
			Expect(tg).To(Equal(target{ID: side.name, Type: "s3", Endpoint: "https://media." + side.peerNS + ".svc:443", Username: access, Password: secret,
				CAFile: "/etc/strata/notify/ca-" + side.name + ".crt"}))
			Expect(string(data["ca-"+side.name+".crt"])).To(Equal(bundleOf(side.peerNS)))
		}
		sts := &appsv1.StatefulSet{}
		Eventually(func() []corev1.Volume {
			_ = k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return sts.Spec.Template.Spec.Volumes
		}).Should(ContainElement(And(HaveField("Secret.SecretName", "media-notify-targets"), HaveField("Secret.Items", BeEmpty()))))
		template := sts.Spec.Template.DeepCopy()

		By("a third Tenant naming the peer, which does not name it, gets no root credentials")
		ns3 := newNamespace()
		c := tenant(ns3)
		c.Spec.Replication.Remotes = []v1.ReplicationRemoteSpec{{Name: "steal", TenantRef: peer}}
		Expect(k8s.Create(ctx, c)).To(Succeed())
		Eventually(tenantCondition(c, v1.ConditionCredentialsReady)).Should(Equal("False/SecretMissing"))
		Expect(c.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("used only for a pair both Tenants declare"))))
		Consistently(func() bool { // not even an empty list: the pods' events wait for their targets
			return apierrors.IsNotFound(k8s.Get(ctx, key(ns3, "media-notify-targets"), &corev1.Secret{}))
		}).Should(BeTrue())

		By("the peer's root credentials rotate: the targets follow, and the servers, which read them again, do not roll")
		root := &corev1.Secret{}
		Expect(k8s.Get(ctx, key(ns2, "media-root-credentials"), root)).To(Succeed())
		root.Data["secretKey"] = []byte("rotatedSecretKeyOfFortyCharacters0123456")
		Expect(k8s.Update(ctx, root)).To(Succeed())
		Eventually(func() string { tg, _ := targetsOf(ns); return tg.Password }).Should(Equal("rotatedSecretKeyOfFortyCharacters0123456"))
		Consistently(func() *corev1.PodTemplateSpec {
			_ = k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return &sts.Spec.Template
		}).WithTimeout(3 * time.Second).Should(Equal(template))
	})

	It("bucket defaults that cannot be honoured are refused by the API server, saying why", func() {
		ns := newNamespace()
		seven := int32(7)
		for want, b := range map[string]v1.BucketSpec{
			"versioning cannot be Suspended":       {Name: "locked", Versioning: "Suspended", ObjectLock: &v1.BucketObjectLock{}},
			"needs both mode and days":             {Name: "locked", ObjectLock: &v1.BucketObjectLock{Mode: "GOVERNANCE"}},
			"kmsKeyID goes with algorithm aws:kms": {Name: "sealed", Encryption: &v1.BucketEncryption{Algorithm: "AES256", KMSKeyID: "k1"}},
			"a lifecycle needs at least one of":    {Name: "logs", Lifecycle: &v1.BucketLifecycle{}},
			"should be greater than or equal to 1": {Name: "logs", Lifecycle: &v1.BucketLifecycle{ExpirationDays: new(int32)}},
			"supported values":                     {Name: "logs", Encryption: &v1.BucketEncryption{Algorithm: "aws:kms:dsse"}},
		} {
			t := tenant(ns)
			t.Spec.Buckets = []v1.BucketSpec{b}
			err := k8s.Create(ctx, t)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%+v: %v", b, err)
			Expect(strings.ToLower(err.Error())).To(ContainSubstring(strings.ToLower(want)))
		}
		t := tenant(ns)
		t.Spec.Buckets = []v1.BucketSpec{{Name: "backups", Versioning: "Enabled", ObjectLock: &v1.BucketObjectLock{Mode: "COMPLIANCE", Days: 30},
			Encryption: &v1.BucketEncryption{Algorithm: "aws:kms", KMSKeyID: "k1"}, Lifecycle: &v1.BucketLifecycle{NoncurrentVersionExpirationDays: &seven}}}
		Expect(k8s.Create(ctx, t)).To(Succeed())
	})

	It("a tenant moving from referenced to generated root keys gets generated ones", func() {
		ns := newNamespace()
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-root"},
			StringData: map[string]string{"accessKey": "MYROOTKEY", "secretKey": "my-root-secret"}})).To(Succeed())
		t := tenant(ns)
		t.Spec.Credentials.SecretRef = &v1.SecretReference{Name: "my-root"}
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCredentialsReady)).Should(Equal("True/Reconciled"))
		update(t, func(t *v1.Tenant) { t.Spec.Credentials.SecretRef = nil })
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-root-credentials"), &corev1.Secret{}) }).Should(Succeed())
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "media"), t)
			return t.Status.CredentialsSecret, err
		}).Should(Equal("media-root-credentials"))
	})

	It("a pod that cannot pull its image or start its container is reported on its pool and the Tenant, with Events", func() {
		ns := newNamespace()
		t, sp, gp := tenant(ns), nvmePool(ns), gatewayPool(ns)
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		Expect(k8s.Create(ctx, gp)).To(Succeed())
		sts := &appsv1.StatefulSet{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), sts) }).Should(Succeed())
		d := &appsv1.Deployment{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nas"), d) }).Should(Succeed())

		// What the StatefulSet and Deployment controllers and a kubelet
		// would make: pods with the templates' labels and container,
		// waiting as the kubelet says.
		waiting := func(name string, tmpl corev1.PodTemplateSpec, reason, message string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: tmpl.Labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "strata", Image: tmpl.Spec.Containers[0].Image}}}}
			Expect(k8s.Create(ctx, p)).To(Succeed())
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "strata", Image: tmpl.Spec.Containers[0].Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
			}}}
			Expect(k8s.Status().Update(ctx, p)).To(Succeed())
			return p
		}
		server := waiting("media-nvme-0", sts.Spec.Template, "ImagePullBackOff", `Back-off pulling image "ghcr.io/strata-storage/strata:nope"`)
		Eventually(poolCondition(sp, v1.ConditionReady)).Should(Equal("False/ImagePullFailed"))
		Expect(meta.FindStatusCondition(sp.Status.Conditions, v1.ConditionReady).Message).To(
			ContainSubstring(`pod media-nvme-0 container strata: ImagePullBackOff: Back-off pulling image "ghcr.io/strata-storage/strata:nope"`))
		Eventually(tenantCondition(t, v1.ConditionReady)).Should(Equal("False/ImagePullFailed"))
		Expect(meta.FindStatusCondition(t.Status.Conditions, v1.ConditionReady).Message).To(HavePrefix("ServerPool nvme: 0 of 4 servers ready; pod media-nvme-0"))
		Eventually(eventsFor(ns, "media")).Should(ContainElement("ImagePullFailed"))
		Eventually(eventsFor(ns, sp.Name)).Should(ContainElement("ImagePullFailed"))

		waiting("media-nas-abc12", d.Spec.Template, "CreateContainerConfigError", `secret "media-iam" not found`)
		// The Deployment controller counts the new pod.
		Eventually(func() error {
			if err := k8s.Get(ctx, key(ns, "media-nas"), d); err != nil {
				return err
			}
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1}
			return k8s.Status().Update(ctx, d)
		}).Should(Succeed())
		Eventually(gatewayCondition(gp, v1.ConditionReady)).Should(Equal("False/ContainerStartFailed"))
		Eventually(eventsFor(ns, gp.Name)).Should(ContainElement("ContainerStartFailed"))
		Expect(meta.FindStatusCondition(gp.Status.Conditions, v1.ConditionReady).Message).To(
			ContainSubstring(`pod media-nas-abc12 container strata: CreateContainerConfigError: secret "media-iam" not found`))
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, t.Name), t)
			return meta.FindStatusCondition(t.Status.Conditions, v1.ConditionReady).Message, err
		}).Should(And(ContainSubstring("ServerPool nvme: "), ContainSubstring("GatewayPool nas: ")))
		Expect(tenantCondition(t, v1.ConditionReady)()).To(Equal("False/ImagePullFailed"), "an image problem outranks a container problem")

		By("once the pods run, the pools and the Tenant are Ready")
		Expect(k8s.Delete(ctx, server)).To(Succeed())
		markStatefulSetReady(ns, "media-nvme")
		markDeploymentReady(ns, "media-nas")
		Eventually(poolCondition(sp, v1.ConditionReady)).Should(Equal("True/Reconciled"))
		Eventually(gatewayCondition(gp, v1.ConditionReady)).Should(Equal("True/Reconciled"))
		Eventually(tenantCondition(t, v1.ConditionReady)).Should(Equal("True/Reconciled"))
	})

	It("a gateway claim that does not exist is reported", func() {
		ns := newNamespace()
		Expect(k8s.Create(ctx, tenant(ns))).To(Succeed())
		gp := gatewayPool(ns)
		gp.Spec.Volume = v1.GatewayVolume{ClaimName: "shared-fs"}
		Expect(k8s.Create(ctx, gp)).To(Succeed())
		Eventually(gatewayCondition(gp, v1.ConditionReady)).Should(Equal("False/ClaimMissing"))
		Eventually(eventsFor(ns, "nas")).Should(ContainElement("ClaimMissing"))
	})
})
