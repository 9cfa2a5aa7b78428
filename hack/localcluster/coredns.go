package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The cluster DNS is CoreDNS (hack/envtest.sh --nodes builds it with the
// plugins below), run by the harness in the cluster namespace rather than
// as a pod: it is up before any node, and a lost node never takes it
// along. Pods reach it as the kube-dns Service, whose one endpoint is the
// node network's bridge address.
const corefile = `cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %[1]s
    errors
    health 127.0.0.1:18080
    ready 127.0.0.1:18181
    loadbalance
    cache 5
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %[2]s
        pods insecure
        ttl 5
    }
}
.:53 {
    bind %[1]s
    errors
    # Nothing upstream: every other name does not exist.
    template ANY ANY {
        rcode NXDOMAIN
    }
}
`

// startCoreDNS runs CoreDNS as a user allowed to watch what it serves, and
// creates kube-system/kube-dns for it.
func startCoreDNS(ctx context.Context, c *runConfig, cp *controlPlane, cs kubernetes.Interface) (*process, error) {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "localcluster:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if err := bindClusterRole(ctx, cs, role.Name, role.Name, "system:coredns"); err != nil {
		return nil, err
	}
	user, err := cp.addUser("system:coredns")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.State, "coredns")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, user, user.Host); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, fmt.Appendf(nil, corefile, nodeNetBridgeAddr, kubeconfig), 0o600); err != nil {
		return nil, err
	}
	p := newProcess("coredns", filepath.Join(c.Assets, "coredns"), []string{"-conf", conf}, c.logFile("coredns.log"))
	if err := p.start(nil); err != nil {
		return nil, err
	}
	if err := createDNSService(ctx, cs); err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	// Ready once the kubernetes plugin has synced (the ready plugin).
	deadline := time.Now().Add(60 * time.Second)
	for {
		if corednsReady() {
			return p, nil
		}
		select {
		case <-p.exited():
			return nil, fmt.Errorf("coredns exited: %s", lastLines(c.logFile("coredns.log"), 20))
		case <-ctx.Done():
			p.stop(5 * time.Second)
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop(5 * time.Second)
			return nil, fmt.Errorf("coredns not ready after a minute: %s", lastLines(c.logFile("coredns.log"), 20))
		}
	}
}

// createDNSService is kube-system/kube-dns at the address every kubelet
// puts in its pods' resolv.conf, served by the harness's CoreDNS.
func createDNSService(ctx context.Context, cs kubernetes.Interface) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: clusterDNSIP,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-dns Service: %w", err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "kube-dns-localcluster", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: "localcluster"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{nodeNetBridgeAddr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(slice.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-dns EndpointSlice: %w", err)
	}
	return nil
}

// corednsReady asks CoreDNS's ready plugin.
func corednsReady() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://127.0.0.1:18181/ready")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
