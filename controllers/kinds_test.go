package controllers

import (
	"context"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestSecretOps(t *testing.T) {
	desired := func() *corev1.Secret {
		return &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a": []byte("1")}}
	}
	cases := []struct {
		name string
		live func(*corev1.Secret)
		same bool
	}{
		{"equal", func(*corev1.Secret) {}, true},
		{"a value differs", func(s *corev1.Secret) { s.Data["a"] = []byte("2") }, false},
		{"a key added by hand", func(s *corev1.Secret) { s.Data["b"] = []byte("2") }, false},
		{"a key removed", func(s *corev1.Secret) { s.Data = map[string][]byte{} }, false},
		{"another type", func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, d := desired(), desired()
			tc.live(l)
			if got := secretOps.same(l, d); got != tc.same {
				t.Errorf("same = %v, want %v", got, tc.same)
			}
			typ := l.Type
			secretOps.merge(l, d)
			// A Secret's type is immutable: merge leaves it.
			if !equality.Semantic.DeepEqual(l.Data, d.Data) || l.Type != typ {
				t.Errorf("after merge: %s %v, want %s %v", l.Type, l.Data, typ, d.Data)
			}
		})
	}
}

func TestConfigMapOps(t *testing.T) {
	desired := func() *corev1.ConfigMap { return &corev1.ConfigMap{Data: map[string]string{"topology.json": "{}"}} }
	cases := []struct {
		name string
		live func(*corev1.ConfigMap)
		same bool
	}{
		{"equal", func(*corev1.ConfigMap) {}, true},
		{"a value differs", func(c *corev1.ConfigMap) { c.Data["topology.json"] = "[]" }, false},
		{"a key added by hand", func(c *corev1.ConfigMap) { c.Data["extra"] = "" }, false},
		{"emptied", func(c *corev1.ConfigMap) { c.Data = nil }, false},
		{"binary data is not the operator's", func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{"b": nil} }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, d := desired(), desired()
			tc.live(l)
			if got := configMapOps.same(l, d); got != tc.same {
				t.Errorf("same = %v, want %v", got, tc.same)
			}
			configMapOps.merge(l, d)
			if !configMapOps.same(l, d) {
				t.Errorf("after merge, data %v, want %v", l.Data, d.Data)
			}
		})
	}
}

// service is the S3 Service as the operator builds it.
func service(typ corev1.ServiceType, ports ...string) *corev1.Service {
	s := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": "strata"}}}
	for i, name := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: name, Port: int32(9000 + i), TargetPort: intstr.FromInt32(int32(9000 + i))})
	}
	return s
}

// served is s as the API server returns it: a cluster IP and node ports
// allocated, defaults filled in.
func served(s *corev1.Service) *corev1.Service {
	s = s.DeepCopy()
	s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.0.0.7", []string{"10.0.0.7"}
	s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	if s.Spec.Type != corev1.ServiceTypeClusterIP {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].Protocol = corev1.ProtocolTCP
		if s.Spec.Type != corev1.ServiceTypeClusterIP && s.Spec.Ports[i].NodePort == 0 {
			s.Spec.Ports[i].NodePort = int32(30000 + i)
		}
	}
	return s
}

func TestServiceOpsSame(t *testing.T) {
	cases := []struct {
		name    string
		desired *corev1.Service
		live    func(*corev1.Service)
		same    bool
	}{
		{"as served: allocated IP and node ports, defaults", service(corev1.ServiceTypeNodePort, "s3", "admin"), func(*corev1.Service) {}, true},
		{"headless as served", service(corev1.ServiceTypeClusterIP, "s3"), func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }, true},
		{"another type", service(corev1.ServiceTypeNodePort, "s3"), func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }, false},
		{"another selector", service(corev1.ServiceTypeNodePort, "s3"), func(s *corev1.Service) { s.Spec.Selector["app"] = "other" }, false},
		{"a port number changed", service(corev1.ServiceTypeNodePort, "s3"), func(s *corev1.Service) { s.Spec.Ports[0].Port = 80 }, false},
		{"a port added by hand", service(corev1.ServiceTypeNodePort, "s3"), func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "x", Port: 1})
		}, false},
		{"a port removed", service(corev1.ServiceTypeNodePort, "s3", "admin"), func(s *corev1.Service) { s.Spec.Ports = s.Spec.Ports[:1] }, false},
		{"not-ready addresses published", service(corev1.ServiceTypeClusterIP, "s3"), func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := served(tc.desired)
			tc.live(l)
			if got := serviceOps.same(l, tc.desired); got != tc.same {
				t.Errorf("same = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestServiceOpsMerge(t *testing.T) {
	cases := []struct {
		name      string
		live      *corev1.Service
		desired   *corev1.Service
		nodePorts []int32 // of the merged ports, in order
	}{
		{"allocated node ports kept", served(service(corev1.ServiceTypeNodePort, "s3", "admin")),
			service(corev1.ServiceTypeNodePort, "s3", "admin"), []int32{30000, 30001}},
		{"kept by port name, not position", served(service(corev1.ServiceTypeNodePort, "admin", "s3")),
			service(corev1.ServiceTypeNodePort, "s3", "admin"), []int32{30001, 30000}},
		{"kept for a load balancer", served(service(corev1.ServiceTypeLoadBalancer, "s3")),
			service(corev1.ServiceTypeLoadBalancer, "s3"), []int32{30000}},
		{"kept from NodePort to LoadBalancer", served(service(corev1.ServiceTypeNodePort, "s3")),
			service(corev1.ServiceTypeLoadBalancer, "s3"), []int32{30000}},
		{"a node port asked for wins", served(service(corev1.ServiceTypeNodePort, "s3")),
			withNodePort(service(corev1.ServiceTypeNodePort, "s3"), 31000), []int32{31000}},
		{"a new port gets none (the API server allocates it)", served(service(corev1.ServiceTypeNodePort, "s3")),
			service(corev1.ServiceTypeNodePort, "s3", "admin"), []int32{30000, 0}},
		{"dropped for ClusterIP", served(service(corev1.ServiceTypeNodePort, "s3")),
			service(corev1.ServiceTypeClusterIP, "s3"), []int32{0}},
		{"not-ready addresses published as asked", served(service(corev1.ServiceTypeClusterIP, "s3")),
			publishNotReady(service(corev1.ServiceTypeClusterIP, "s3")), []int32{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.live
			serviceOps.merge(l, tc.desired)
			if l.Spec.Type != tc.desired.Spec.Type || len(l.Spec.Ports) != len(tc.nodePorts) {
				t.Fatalf("merged %s with %d ports, want %s with %d", l.Spec.Type, len(l.Spec.Ports), tc.desired.Spec.Type, len(tc.nodePorts))
			}
			for i, p := range l.Spec.Ports {
				if p.NodePort != tc.nodePorts[i] || p.Name != tc.desired.Spec.Ports[i].Name {
					t.Errorf("port %d: %s node port %d, want %s %d", i, p.Name, p.NodePort, tc.desired.Spec.Ports[i].Name, tc.nodePorts[i])
				}
			}
			// What the API server allocated and defaulted stays.
			if l.Spec.ClusterIP != "10.0.0.7" || len(l.Spec.ClusterIPs) != 1 || l.Spec.SessionAffinity != corev1.ServiceAffinityNone ||
				len(l.Spec.IPFamilies) != 1 || l.Spec.InternalTrafficPolicy == nil {
				t.Errorf("allocated or defaulted fields lost: %+v", l.Spec)
			}
			if !serviceOps.same(l, tc.desired) {
				t.Errorf("merged service is not the desired one: %+v", l.Spec)
			}
		})
	}
}

func publishNotReady(s *corev1.Service) *corev1.Service {
	s.Spec.PublishNotReadyAddresses = true
	return s
}

func withNodePort(s *corev1.Service, port int32) *corev1.Service {
	s.Spec.Ports[0].NodePort = port
	return s
}

// statefulSet is a server StatefulSet as the operator builds it.
func statefulSet(replicas int32, image string) *appsv1.StatefulSet {
	labels := map[string]string{"app": "strata"}
	return &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
		Replicas:            ptr.To(replicas),
		ServiceName:         "media-hl",
		PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector:            &metav1.LabelSelector{MatchLabels: labels},
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)}},
		PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data0"}}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"credentials-hash": "c1"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "strata", Image: image}}},
		},
	}}
}

// runningStatefulSet is s as the API server returns it, defaults filled
// in, with `running` pods and the roll-out partition at `partition`.
func runningStatefulSet(s *appsv1.StatefulSet, running, partition int32) *appsv1.StatefulSet {
	s = s.DeepCopy()
	s.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(partition), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	pod := &s.Spec.Template.Spec
	pod.RestartPolicy, pod.DNSPolicy, pod.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, corev1.DefaultSchedulerName
	pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.SecurityContext = &corev1.PodSecurityContext{}
	for i := range pod.Containers {
		pod.Containers[i].ImagePullPolicy = corev1.PullIfNotPresent
		pod.Containers[i].TerminationMessagePath = corev1.TerminationMessagePathDefault
		pod.Containers[i].TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	s.Status.Replicas, s.Status.ReadyReplicas = running, running
	return s
}

func TestStatefulSetOpsSame(t *testing.T) {
	cases := []struct {
		name string
		live func(*appsv1.StatefulSet)
		same bool
	}{
		{"as served", func(*appsv1.StatefulSet) {}, true},
		{"partition moved by the roll-out", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](2) }, true},
		{"scaled by hand", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](3) }, false},
		{"another image", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "strata:old" }, false},
		{"a pod annotation changed", func(s *appsv1.StatefulSet) { s.Spec.Template.Annotations["credentials-hash"] = "c0" }, false},
		{"a container added to the template", func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers = append(s.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar"})
		}, false},
		{"another update strategy", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := statefulSet(4, "strata:new")
			l := runningStatefulSet(d, 4, 0)
			tc.live(l)
			if got := statefulSetOps.same(l, d); got != tc.same {
				t.Errorf("same = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestStatefulSetOpsMerge(t *testing.T) {
	cases := []struct {
		name                     string
		running, partition, want int32 // live pods, live partition, merged partition
		liveImage                string
		replicas                 int32 // desired
		onDelete                 bool
	}{
		{name: "unchanged: the roll-out's partition stays", running: 4, partition: 2, want: 2, liveImage: "strata:new", replicas: 4},
		{name: "new template of running servers: all held back", running: 4, partition: 0, want: 4, liveImage: "strata:old", replicas: 4},
		{name: "new template mid roll-out: all held back again", running: 4, partition: 1, want: 4, liveImage: "strata:old", replicas: 4},
		{name: "new template, nothing running yet: nothing held", running: 0, partition: 0, want: 0, liveImage: "strata:old", replicas: 4},
		{name: "new template and scaled up: every server held", running: 4, partition: 0, want: 6, liveImage: "strata:old", replicas: 6},
		{name: "scaled down below the partition: clamped", running: 4, partition: 3, want: 2, liveImage: "strata:new", replicas: 2},
		{name: "scaled up: the partition stays", running: 4, partition: 2, want: 2, liveImage: "strata:new", replicas: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := runningStatefulSet(statefulSet(4, tc.liveImage), tc.running, tc.partition)
			d := statefulSet(tc.replicas, "strata:new")
			d.Spec.ServiceName = "immutable"
			d.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
			statefulSetOps.merge(l, d)
			if got := rolloutPartition(l); got != tc.want {
				t.Errorf("partition %d, want %d", got, tc.want)
			}
			if *l.Spec.Replicas != tc.replicas || l.Spec.Template.Spec.Containers[0].Image != "strata:new" ||
				l.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				t.Errorf("replicas, template or claim retention not merged: %+v", l.Spec)
			}
			if l.Spec.ServiceName != "media-hl" {
				t.Errorf("immutable service name changed to %q", l.Spec.ServiceName)
			}
			if !statefulSetOps.same(l, d) {
				t.Errorf("merged StatefulSet is not the desired one")
			}
		})
	}
	t.Run("OnDelete: no partition", func(t *testing.T) {
		l := runningStatefulSet(statefulSet(4, "strata:old"), 4, 2)
		d := statefulSet(4, "strata:new")
		d.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		statefulSetOps.merge(l, d)
		if l.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType || l.Spec.UpdateStrategy.RollingUpdate != nil {
			t.Errorf("update strategy %+v", l.Spec.UpdateStrategy)
		}
	})
}

// deployment is a gateway Deployment as the operator builds it.
func deployment(replicas *int32, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "media-nas"},
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gw"}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "gw"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "strata", Image: image}}},
			},
		}}
}

func TestDeploymentOps(t *testing.T) {
	cases := []struct {
		name         string
		desired      *int32 // replicas
		live         func(*appsv1.Deployment)
		same         bool
		wantReplicas int32 // after merge
	}{
		{"as served", ptr.To[int32](2), func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("25%"))
			d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
		}, true, 2},
		{"scaled by hand", ptr.To[int32](2), func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }, false, 2},
		{"scaled by the autoscaler", nil, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }, true, 5},
		{"another image, autoscaled", nil, func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr.To[int32](5)
			d.Spec.Template.Spec.Containers[0].Image = "strata:old"
		}, false, 5},
		{"another image", ptr.To[int32](2), func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "strata:old" }, false, 2},
		{"another strategy", ptr.To[int32](2), func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}, false, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := deployment(tc.desired, "strata:new")
			l := deployment(ptr.To[int32](2), "strata:new")
			tc.live(l)
			if got := deploymentOps.same(l, d); got != tc.same {
				t.Errorf("same = %v, want %v", got, tc.same)
			}
			deploymentOps.merge(l, d)
			if *l.Spec.Replicas != tc.wantReplicas || l.Spec.Template.Spec.Containers[0].Image != "strata:new" ||
				l.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
				t.Errorf("merged: %d replicas, %+v", *l.Spec.Replicas, l.Spec)
			}
		})
	}
}

// TestAutoscaledDeployment follows a gateway Deployment whose replica count
// a HorizontalPodAutoscaler owns through create, a scale and two passes.
func TestAutoscaledDeployment(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	pass := func(image string) opResult {
		t.Helper()
		d := deployment(ptr.To[int32](2), image)
		op, err := apply(ctx, c, clientgoscheme.Scheme, nil, d, autoscaledDeploymentOps(d))
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	live := func() *appsv1.Deployment {
		t.Helper()
		l := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "media-nas"}, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	if op := pass("strata:new"); op != opCreated || *live().Spec.Replicas != 2 {
		t.Fatalf("first pass: %q, %d replicas; want created with 2", op, *live().Spec.Replicas)
	}
	scaled := live()
	scaled.Spec.Replicas = ptr.To[int32](5) // the autoscaler's doing
	if err := c.Update(ctx, scaled); err != nil {
		t.Fatal(err)
	}
	if op := pass("strata:new"); op != opNone || *live().Spec.Replicas != 5 {
		t.Errorf("idle pass: %q, %d replicas; want no write, 5", op, *live().Spec.Replicas)
	}
	if op := pass("strata:newer"); op != opUpdated || *live().Spec.Replicas != 5 {
		t.Errorf("new image: %q, %d replicas; want updated, 5", op, *live().Spec.Replicas)
	}
}

// specCase checks a kind whose whole spec is the operator's: the API
// server's defaults on live do not count as a change, an edit does, and
// merge puts the desired spec back.
type specCase struct {
	name string
	// run returns same(defaulted live), same(edited live) and whether the
	// merged live spec is the desired one.
	run func() (sameDefaulted, sameEdited, merged bool)
}

func specOpsCase[T client.Object](name string, ops kindOps[T], spec func(T) any, desired func() T, defaulted, edited func(T)) specCase {
	return specCase{name: name, run: func() (bool, bool, bool) {
		l := desired()
		defaulted(l)
		sameDefaulted := ops.same(l, desired())
		edited(l)
		sameEdited := ops.same(l, desired())
		ops.merge(l, desired())
		return sameDefaulted, sameEdited, equality.Semantic.DeepEqual(spec(l), spec(desired()))
	}}
}

func TestSpecOwnedKinds(t *testing.T) {
	cases := []specCase{
		specOpsCase("PodDisruptionBudget", pdbOps, func(p *policyv1.PodDisruptionBudget) any { return p.Spec },
			func() *policyv1.PodDisruptionBudget {
				return &policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "strata"}}}}
			},
			func(p *policyv1.PodDisruptionBudget) {
				p.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
			},
			func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) }),
		specOpsCase("HorizontalPodAutoscaler", hpaOps, func(h *autoscalingv2.HorizontalPodAutoscaler) any { return h.Spec },
			func() *autoscalingv2.HorizontalPodAutoscaler {
				return &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "media-nas"},
					MinReplicas:    ptr.To[int32](2), MaxReplicas: 6}}
			},
			func(h *autoscalingv2.HorizontalPodAutoscaler) {
				h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](300)}}
			},
			func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 10 }),
		specOpsCase("Certificate", certificateOps, func(c *cmv1.Certificate) any { return c.Spec },
			func() *cmv1.Certificate {
				return &cmv1.Certificate{Spec: cmv1.CertificateSpec{SecretName: "media-tls", DNSNames: []string{"media", "media.ns.svc"},
					IssuerRef: cmmeta.IssuerReference{Name: "ca", Kind: "Issuer"}}}
			},
			func(c *cmv1.Certificate) { c.Spec.IssuerRef.Group = "cert-manager.io" },
			func(c *cmv1.Certificate) { c.Spec.DNSNames = c.Spec.DNSNames[:1] }),
		specOpsCase("ServiceMonitor", serviceMonitorOps, func(m *monitoringv1.ServiceMonitor) any { return m.Spec },
			func() *monitoringv1.ServiceMonitor {
				return &monitoringv1.ServiceMonitor{Spec: monitoringv1.ServiceMonitorSpec{
					Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "strata"}}, Endpoints: []monitoringv1.Endpoint{{Port: "s3"}}}}
			},
			func(m *monitoringv1.ServiceMonitor) { m.Spec.JobLabel = "app" },
			func(m *monitoringv1.ServiceMonitor) { m.Spec.Endpoints[0].Port = "admin" }),
		specOpsCase("PrometheusRule", prometheusRuleOps, func(r *monitoringv1.PrometheusRule) any { return r.Spec },
			func() *monitoringv1.PrometheusRule {
				return &monitoringv1.PrometheusRule{Spec: monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{{
					Name: "strata", Rules: []monitoringv1.Rule{{Alert: "StrataDriveOffline", Expr: intstr.FromString("strata_drives_offline > 0")}}}}}}
			},
			func(r *monitoringv1.PrometheusRule) { r.Spec.Groups[0].Interval = ptr.To(monitoringv1.Duration("30s")) },
			func(r *monitoringv1.PrometheusRule) { r.Spec.Groups[0].Rules = nil }),
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sameDefaulted, sameEdited, merged := tc.run()
			if !sameDefaulted {
				t.Error("fields the operator does not set count as a change")
			}
			if sameEdited {
				t.Error("an edited spec does not count as a change")
			}
			if !merged {
				t.Error("merge does not restore the desired spec")
			}
		})
	}
}
