package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-storage/strata/internal/builders"
)

// With --monitoring the cluster also runs prometheus-operator (a Deployment)
// and one Prometheus that selects every strata tenant's ServiceMonitor and
// PrometheusRule, from the images hack/monitoring-images.sh writes next to
// ours. The references are the images' own: whatever version that script
// built is what runs.
const (
	monitoringNamespace = "monitoring"
	// prometheusName is the Prometheus object; prometheus-operator names
	// its StatefulSet prometheus-<name> and the governing Service
	// prometheus-operated, which the host's Prometheus port forwards to.
	prometheusName    = "strata"
	prometheusService = monitoringNamespace + "/prometheus-operated"

	operatorRepository   = "quay.io/prometheus-operator/prometheus-operator"
	reloaderRepository   = "quay.io/prometheus-operator/prometheus-config-reloader"
	prometheusRepository = "quay.io/prometheus/prometheus"

	// monitoringCRDs is the directory of prometheus-operator's CRDs in the
	// images directory.
	monitoringCRDs = "prometheus-operator-crds"
)

// monitoringImages are the references of the three images.
type monitoringImages struct {
	operator, reloader, prometheus string
	prometheusVersion              string // the Prometheus image's tag
}

// resolveMonitoringImages finds the images hack/monitoring-images.sh wrote.
func resolveMonitoringImages(s *imageStore) (monitoringImages, error) {
	var m monitoringImages
	for repo, ref := range map[string]*string{
		operatorRepository: &m.operator, reloaderRepository: &m.reloader, prometheusRepository: &m.prometheus,
	} {
		refs := s.refsOf(repo)
		if len(refs) != 1 {
			return m, fmt.Errorf("--monitoring needs one image of %s among the images, found %d (run hack/monitoring-images.sh %s)", repo, len(refs), s.layouts)
		}
		*ref = refs[0]
	}
	tag, err := name.NewTag(m.prometheus)
	if err != nil {
		return m, err
	}
	m.prometheusVersion = tag.TagStr()
	return m, nil
}

// monitoringObjects are prometheus-operator and a Prometheus for strata's
// tenants: each with a ServiceAccount bound to the ClusterRole it needs.
func monitoringObjects(img monitoringImages) []client.Object {
	ns := monitoringNamespace
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/part-of": "localcluster-monitoring"}}
	}
	clusterMeta := func(name string) metav1.ObjectMeta {
		m := meta(name)
		m.Namespace = ""
		return m
	}
	all := []string{"*"}
	rule := func(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
	}
	binding := func(name string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: clusterMeta(name),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		}
	}
	const operator, prometheus = "prometheus-operator", "strata-prometheus"
	opLabels := map[string]string{"app.kubernetes.io/name": operator}
	nonRoot := &corev1.SecurityContext{
		RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	strata := &metav1.LabelSelector{MatchLabels: map[string]string{builders.LabelName: "strata"}}
	everyNamespace := &metav1.LabelSelector{}

	return []client.Object{
		&corev1.Namespace{ObjectMeta: clusterMeta(ns)},

		&corev1.ServiceAccount{ObjectMeta: meta(operator)},
		&rbacv1.ClusterRole{ObjectMeta: clusterMeta(operator), Rules: []rbacv1.PolicyRule{
			rule("monitoring.coreos.com", all, all...),
			rule("apps", []string{"statefulsets"}, all...),
			rule("", []string{"configmaps", "secrets"}, all...),
			rule("", []string{"pods"}, "list", "delete"),
			rule("", []string{"services", "services/finalizers"}, "get", "list", "watch", "create", "update", "delete"),
			rule("discovery.k8s.io", []string{"endpointslices"}, "get", "list", "watch", "create", "update", "delete"),
			rule("", []string{"nodes"}, "list", "watch"),
			rule("", []string{"namespaces"}, "get", "list", "watch"),
			rule("", []string{"events"}, "create", "patch"),
			rule("events.k8s.io", []string{"events"}, "create", "patch"),
			rule("storage.k8s.io", []string{"storageclasses"}, "get"),
		}},
		binding(operator),
		&appsv1.Deployment{
			ObjectMeta: meta(operator),
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: opLabels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: opLabels},
					Spec: corev1.PodSpec{
						ServiceAccountName: operator,
						Containers: []corev1.Container{{
							Name:  operator,
							Image: img.operator,
							Args: []string{
								// The reloader of the images here, whatever
								// the operator's build would default to.
								"--prometheus-config-reloader=" + img.reloader,
								"--web.listen-address=:8080",
							},
							Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
							ReadinessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}, PeriodSeconds: 5},
							SecurityContext: nonRoot,
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
								corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
							}},
						}},
					},
				},
			},
		},

		&corev1.ServiceAccount{ObjectMeta: meta(prometheus)},
		&rbacv1.ClusterRole{ObjectMeta: clusterMeta(prometheus), Rules: []rbacv1.PolicyRule{
			rule("", []string{"services", "endpoints", "pods"}, "get", "list", "watch"),
			rule("discovery.k8s.io", []string{"endpointslices"}, "get", "list", "watch"),
			rule("", []string{"configmaps"}, "get"),
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
		}},
		binding(prometheus),
		&monitoringv1.Prometheus{
			ObjectMeta: meta(prometheusName),
			Spec: monitoringv1.PrometheusSpec{
				CommonPrometheusFields: monitoringv1.CommonPrometheusFields{
					Image: ptr.To(img.prometheus), Version: img.prometheusVersion,
					Replicas:                        ptr.To[int32](1),
					ServiceAccountName:              prometheus,
					ServiceMonitorSelector:          strata,
					ServiceMonitorNamespaceSelector: everyNamespace,
					ServiceDiscoveryRole:            ptr.To(monitoringv1.EndpointSliceRole),
					ScrapeInterval:                  "15s",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
					}},
				},
				RuleSelector:          strata,
				RuleNamespaceSelector: everyNamespace,
				EvaluationInterval:    "15s",
			},
		},
	}
}

// startMonitoring creates the monitoring objects (the cluster is new: an
// object that exists already was made by an earlier pass).
func startMonitoring(ctx context.Context, cfg *rest.Config, img monitoringImages) error {
	kc, err := monitoringClient(cfg)
	if err != nil {
		return err
	}
	for _, o := range monitoringObjects(img) {
		if err := kc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

func monitoringClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := monitoringv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// waitPrometheus waits until the Prometheus pods are Ready: prometheus-
// operator ran, made the StatefulSet, and Prometheus loaded its first
// configuration (its readiness probe is /-/ready).
func waitPrometheus(ctx context.Context, cfg *rest.Config) error {
	kc, err := monitoringClient(cfg)
	if err != nil {
		return err
	}
	var last string
	for {
		var sts appsv1.StatefulSet
		err := kc.Get(ctx, client.ObjectKey{Namespace: monitoringNamespace, Name: "prometheus-" + prometheusName}, &sts)
		switch {
		case err == nil && sts.Status.ReadyReplicas >= 1:
			return nil
		case err == nil:
			last = fmt.Sprintf("StatefulSet %s: %d of %d ready", sts.Name, sts.Status.ReadyReplicas, ptr.Deref(sts.Spec.Replicas, 1))
		default:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("prometheus not ready: %s", last)
		case <-time.After(2 * time.Second):
		}
	}
}

// monitoringCRDDir is where prometheus-operator's CRDs are, next to the
// images.
func monitoringCRDDir(images string) string { return filepath.Join(images, monitoringCRDs) }
